"""The error table: one property per class of outcome."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from workloads import outcomes


def err(code, **kw):
    return KafkaError(code, **kw)


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError._PURGE_INFLIGHT,
    ],
)
def test_a_send_whose_outcome_the_client_cannot_know_is_info(code):
    outcome = outcomes.classify(err(code), outcomes.SEND)
    assert outcome.type == "info"
    assert outcome.error == err(code).name()


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError._PURGE_QUEUE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.PRODUCER_FENCED,
        KafkaError._FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ],
)
def test_a_send_refused_before_any_append_is_fail(code):
    assert outcomes.classify(err(code), outcomes.SEND).type == "fail"


@pytest.mark.parametrize("code", [KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_LEADER_FOR_PARTITION])
def test_a_rejected_attempt_is_fail_only_when_nothing_was_retried(code):
    assert outcomes.classify(err(code), outcomes.SEND, retries=False).type == "fail"
    assert outcomes.classify(err(code), outcomes.SEND, retries=True).type == "info"


def test_an_unclassified_error_is_never_guessed():
    assert outcomes.classify(err(KafkaError.UNKNOWN), outcomes.SEND).type == "info"
    assert outcomes.classify(RuntimeError("boom"), outcomes.SEND).type == "info"


@pytest.mark.parametrize(
    "code", [KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.PRODUCER_FENCED, KafkaError.NOT_ENOUGH_REPLICAS]
)
def test_a_transaction_that_never_asked_to_commit_is_fail(code):
    assert outcomes.classify(KafkaException(err(code)), outcomes.TXN_BODY).type == "fail"


def test_an_abortable_commit_error_is_fail():
    abortable = err(KafkaError._TIMED_OUT, txn_requires_abort=True)
    assert outcomes.classify(abortable, outcomes.TXN_COMMIT).type == "fail"


def test_a_fenced_commit_is_fail_unless_an_earlier_commit_attempt_was_unknown():
    fenced = err(KafkaError.PRODUCER_FENCED, fatal=True)
    assert outcomes.classify(fenced, outcomes.TXN_COMMIT).type == "fail"
    assert outcomes.classify(fenced, outcomes.TXN_COMMIT, commit_attempted_before=True).type == "info"


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.COORDINATOR_NOT_AVAILABLE])
def test_a_commit_that_may_have_reached_the_coordinator_is_info(code):
    assert outcomes.classify(err(code, retriable=True), outcomes.TXN_COMMIT).type == "info"
    assert outcomes.classify(err(code), outcomes.COMMIT).type == "info"


@pytest.mark.parametrize(
    "code", [KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID]
)
def test_an_offset_commit_the_coordinator_refused_is_fail(code):
    assert outcomes.classify(err(code), outcomes.COMMIT).type == "fail"


def test_init_fenced_is_fail_and_init_timeout_is_info():
    assert outcomes.classify(err(KafkaError.PRODUCER_FENCED), outcomes.INIT).type == "fail"
    assert outcomes.classify(err(KafkaError._TIMED_OUT), outcomes.INIT).type == "info"


def test_a_failed_poll_is_fail():
    assert outcomes.classify(err(KafkaError._TRANSPORT), outcomes.POLL).type == "fail"


@pytest.mark.parametrize(
    "types,expected",
    [
        ([], "ok"),
        (["ok", "ok"], "ok"),
        (["fail", "fail"], "fail"),
        (["ok", "fail"], "info"),
        (["ok", "info"], "info"),
        (["fail", "info"], "info"),
    ],
)
def test_a_batch_is_ok_or_fail_only_when_every_send_agrees(types, expected):
    assert outcomes.combine(types) == expected


def test_every_table_entry_names_a_real_librdkafka_code():
    for table in (outcomes.NOT_WRITTEN, outcomes.REJECTED_ATTEMPT, outcomes.UNKNOWN, outcomes.COMMIT_REJECTED):
        for name in table:
            assert hasattr(KafkaError, name), name
