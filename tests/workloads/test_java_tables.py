"""The Java client's config and error tables alone (no lab): Gregor's own settings
translate, the rest is refused in one line, and each Java exception gets the
librdkafka name whose verdict in workloads/outcomes.py the facts allow.
tests/workloads/test_java_client_lab.py shows the same names coming out of the
real client; docs/CLIENTS.md prints these tables."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.controller import catalogue
from workloads import outcomes
from workloads.java_client import config_table, error_table, tables
from workloads.java_client.kafka_types import KafkaError, KafkaException
from workloads.kafka_client import KafkaError as LibrdkafkaError
from workloads.kafka_client import KafkaException as LibrdkafkaException
from workloads.kafka_io import consumer_config, producer_config

ROOT = Path(__file__).resolve().parents[2]


def gregor_spec(**options):
    return SimpleNamespace(options=options, client_config={}, bootstrap="n1:9092", role="txn", slot=3)


def test_gregor_producer_settings_all_translate():
    conf = producer_config(gregor_spec(), transactional_id="t-1")
    assert config_table.translate(conf, config_table.PRODUCER).java == {
        "max.block.ms": "10000",
        "bootstrap.servers": "n1:9092",
        "client.id": "gregor-txn-3",
        "acks": "all",
        "enable.idempotence": "true",
        "max.in.flight.requests.per.connection": "5",
        "delivery.timeout.ms": "10000",
        "linger.ms": "2",
        "reconnect.backoff.max.ms": "1000",
        "transactional.id": "t-1",
        "transaction.timeout.ms": "10000",
        "request.timeout.ms": "5000",  # the smaller of request.timeout.ms 5000 and socket.timeout.ms 10000
    }


def test_gregor_consumer_settings_all_translate():
    conf = consumer_config(gregor_spec(**{"auto.commit.interval.ms": 250}), "g", auto_commit=True)
    settings = config_table.translate(conf, config_table.CONSUMER)
    assert settings.auto_commit and settings.auto_commit_ms == 250
    assert settings.java["enable.auto.commit"] == "false"  # the driver commits, so on_commit sees each
    assert settings.java["fetch.max.wait.ms"] == "100"
    assert settings.java["request.timeout.ms"] == "10000"  # socket.timeout.ms
    assert settings.java["isolation.level"] == "read_committed"
    assert "enable.partition.eof" not in settings.java


def test_every_claim_of_the_catalogue_translates():
    for claim in catalogue.load():
        for side in catalogue.SIDES:
            options = claim.options(side)
            producer = dict(item.split("=", 1) for item in options.get("producer-config", []))
            consumer = dict(item.split("=", 1) for item in options.get("consumer-config", []))
            config_table.check_settings(producer, consumer, {}, f"{claim.name} {side}")


def test_catalogue_settings_become_their_java_names():
    conf = producer_config(gregor_spec(producer_config={"batch.num.messages": "1", "socket.timeout.ms": "3000"}))
    java = config_table.translate(conf, config_table.PRODUCER).java
    assert java["batch.size"] == "0" and java["request.timeout.ms"] == "3000"


@pytest.mark.parametrize(
    "key, value",
    [
        ("debug", "eos,msg"),
        ("batch.num.messages", 100),
        ("queue.buffering.max.messages", 10),
        ("enable.gapless.guarantee", True),
        ("some.unknown.setting", 1),
        ("linger.ms", "soon"),
    ],
)
def test_a_setting_without_java_counterpart_is_refused_in_one_line(key, value):
    with pytest.raises(config_table.JavaConfigError) as refused:
        config_table.check_settings({key: value}, {}, {}, "--client java")
    line = str(refused.value)
    assert "\n" not in line and key in line and line.startswith("--client java: producer setting")


def test_a_consumer_setting_given_to_a_producer_is_refused():
    with pytest.raises(config_table.JavaConfigError, match="consumer setting, given to a producer"):
        config_table.translate({"group.id": "g"}, config_table.PRODUCER)


def report(cls, code=-1, where="call", state=None, retriable=False, cause=None, **extra):
    chain = [{"class": cls, "code": code, "code_name": "X", "retriable": retriable, "message": "m"}]
    if cause:
        chain.append({"class": cause[0], "code": cause[1], "code_name": "Y", "retriable": False, "message": "c"})
    return {"chain": chain, "where": where, "txn_state": state, **extra}


CASES = [
    # (the driver's report, phase, librdkafka name, outcome under workloads/outcomes.py)
    (report("TimeoutException", 7, "delivery", retriable=True), outcomes.SEND, "_MSG_TIMED_OUT", "info"),
    (report("TimeoutException", 7, "call", "COMMITTING_TRANSACTION", True), outcomes.TXN_COMMIT, "_TIMED_OUT", "info"),
    (report("TimeoutException", 7, "call", "INITIALIZING", True), outcomes.INIT, "_TIMED_OUT", "info"),
    (report("ProducerFencedException", 90, "call", "FATAL_ERROR"), outcomes.TXN_COMMIT, "PRODUCER_FENCED", "fail"),
    (
        report("KafkaException", -1, "call", "FATAL_ERROR", cause=("ProducerFencedException", 90)),
        outcomes.TXN_COMMIT,
        "PRODUCER_FENCED",
        "fail",
    ),
    (
        report("InvalidProducerEpochException", 47, "call", "ABORTABLE_ERROR"),
        outcomes.TXN_COMMIT,
        "INVALID_PRODUCER_EPOCH",
        "fail",
    ),
    (  # a batch expired: EndTxn(commit) was never sent
        report("KafkaException", -1, "call", "ABORTABLE_ERROR", cause=("TimeoutException", 7)),
        outcomes.TXN_COMMIT,
        "_MSG_TIMED_OUT",
        "fail",
    ),
    (
        report("TransactionAbortableException", 120, "call", "ABORTABLE_ERROR"),
        outcomes.TXN_COMMIT,
        "TRANSACTION_ABORTABLE",
        "fail",
    ),
    (report("InvalidTxnStateException", 48, "call", "FATAL_ERROR"), outcomes.TXN_COMMIT, "INVALID_TXN_STATE", "info"),
    (report("CommitFailedException", -1, "commit"), outcomes.COMMIT, "ILLEGAL_GENERATION", "fail"),
    (report("RebalanceInProgressException", 27, "commit"), outcomes.COMMIT, "REBALANCE_IN_PROGRESS", "fail"),
    (report("TimeoutException", 7, "commit", retriable=True), outcomes.COMMIT, "_TIMED_OUT", "info"),
    (report("OutOfOrderSequenceException", 45, "delivery"), outcomes.SEND, "OUT_OF_ORDER_SEQUENCE_NUMBER", "info"),
    (
        report("NotLeaderOrFollowerException", 6, "delivery", retriable=True),
        outcomes.SEND,
        "NOT_LEADER_FOR_PARTITION",
        "info",
    ),
    (
        report("NotEnoughReplicasAfterAppendException", 20, "delivery"),
        outcomes.SEND,
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "info",
    ),
    (report("RecordTooLargeException", 10, "delivery", sync=True), outcomes.SEND, "MSG_SIZE_TOO_LARGE", "fail"),
    (report("TransactionAbortedException", -1, "delivery"), outcomes.SEND, "_PURGE_QUEUE", "fail"),
    (report("KafkaException", -1, "delivery", closing=True), outcomes.SEND, "_DESTROY", "info"),
    (report("IllegalStateException", -1, "delivery", sync=True), outcomes.SEND, "_STATE", "fail"),
    (report("NetworkException", 13, "delivery", retriable=True), outcomes.SEND, "NETWORK_EXCEPTION", "info"),
    (report("SomethingNewException", -1, "delivery"), outcomes.SEND, "SomethingNewException", "info"),
]


@pytest.mark.parametrize("wire, phase, name, outcome", CASES, ids=[c[2] + "/" + c[1] for c in CASES])
def test_each_java_exception_gets_the_name_whose_verdict_the_facts_allow(wire, phase, name, outcome):
    err = error_table.kafka_error(wire)
    assert err.name() == name
    assert outcomes.classify(KafkaException(err), phase, retries=True).type == outcome


def test_the_java_types_are_confluent_kafkas_so_one_except_catches_both():
    err = error_table.kafka_error(report("ProducerFencedException", 90, "call", "FATAL_ERROR"))
    assert isinstance(err, LibrdkafkaError) and err == LibrdkafkaError.PRODUCER_FENCED
    with pytest.raises(LibrdkafkaException):
        raise KafkaException(err)
    assert outcomes.name_of(KafkaException(err)) == "PRODUCER_FENCED"


def test_flags_follow_the_transaction_manager_state():
    fenced = error_table.kafka_error(report("ProducerFencedException", 90, "call", "FATAL_ERROR"))
    assert fenced.fatal() and not fenced.retriable() and not fenced.txn_requires_abort()
    abortable = error_table.kafka_error(
        report("KafkaException", -1, "call", "ABORTABLE_ERROR", True, cause=("TimeoutException", 7))
    )
    assert abortable.txn_requires_abort() and not abortable.retriable() and not abortable.fatal()
    # seen on a 4.4.0 client under the classic protocol: the call threw before the state moved
    assert error_table.kafka_error(report("ProducerFencedException", 90, "call", "COMMITTING_TRANSACTION")).fatal()
    timeout = error_table.kafka_error(report("TimeoutException", 7, "call", "COMMITTING_TRANSACTION", True))
    assert timeout.retriable() and not timeout.fatal() and timeout == KafkaError._TIMED_OUT


def test_every_name_the_table_gives_is_one_outcomes_tables_or_is_judged_unknown():
    """outcomes.py stays the one table of outcomes: the Java path adds no name of its own
    except a Java class name, which every phase that can write judges `info`."""
    names = [r.name for r in (error_table.DESTROYED, error_table.STORED_TIMEOUT, *error_table.CLASS_ROWS)]
    untabled = {n for n in names if tables.outcome_table(n) == "-"}
    assert untabled == {"_QUEUE_FULL", "_AUTO_OFFSET_RESET", "_AUTHENTICATION", "_SSL", "_FAIL"}
    for name in untabled:
        err = KafkaException(KafkaError(KafkaError._FAIL, name=name))
        for phase in (outcomes.SEND, outcomes.INIT, outcomes.COMMIT):
            assert outcomes.classify(err, phase).type == "info", (name, phase)


def test_docs_print_the_tables_the_code_has():
    page = (ROOT / "docs" / "CLIENTS.md").read_text()
    for table in (tables.error_rows(), tables.config_rows()):
        assert table in page, "docs/CLIENTS.md is behind the code: python -m workloads.java_client.tables"
    assert re.search(r"`--client java`", page)
