"""Kafka's Java client against a real lab: Kafka 4.4.0 with transaction.version=2, where
the Java client speaks transaction protocol v2.

- Every workload runs on it (short runs) and is judged valid by the checker; the
  transactional runs' test.json says the brokers saw protocol v2.
- The zombie workload's paused Java producer is fenced, and the checker sees it fenced.
- A group member paused past its session timeout (its JVM with it) is evicted.
- The error mapping against the real exceptions, through the facade with Gregor's own
  configs (workloads/kafka_io.py) and verdicts (workloads/outcomes.py).

One lab for the module (lab name gjava), taken down after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

import pytest
from history_rules import load, problems

from workloads import outcomes
from workloads.java_client import jvm
from workloads.java_client.facade import Consumer, Producer
from workloads.kafka_client import OFFSET_BEGINNING, KafkaException, TopicPartition
from workloads.kafka_io import StatsWatch, consumer_config, producer_config, read_messages

pytestmark = pytest.mark.lab

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
VERSION = "4.4.0"
LAB_ARGS = ["--version", VERSION, "--transaction-version", "2"]


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    from backend_params import lab_name

    from harness.lab import Lab

    name = lab_name("gjava")
    Lab.down(name, progress=lambda _m: None)
    found = Lab.up(nodes=3, name=name, version=VERSION, system_options={"transaction_version": 2}, progress=print)
    yield found
    jvm.stop()  # the facade tests' JVM (this process's)
    found.heal_all()
    if not os.environ.get("GREGOR_KEEP_LAB"):
        Lab.down(name, progress=lambda _m: None)


@pytest.fixture(scope="module")
def spark():
    from checkers.spark import get_spark

    return get_spark("local[2]", {"spark.sql.shuffle.partitions": "2"})


def gregor_run(lab, store, workload, seconds, *extra, client="java"):
    argv = [GREGOR, "run", "--workload", workload, "--lab", lab.name, *LAB_ARGS, "--client", client]
    argv += ["--store", str(store), "--time-limit", str(seconds), "--no-check", "--drain-time-limit", "30", *extra]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    run_dir = os.path.realpath(os.path.join(store, "latest"))
    with open(os.path.join(run_dir, "test.json")) as handle:
        test = json.load(handle)
    history = load(os.path.join(run_dir, "history.jsonl"))
    assert problems(history, test) == []
    assert test["client"]["library"] == client and test["client"]["library.version"]
    assert test["drain"]["complete"] is True
    return run_dir, test, history


def verdict(spark, run_dir) -> str:
    from checkers.check import check_dir

    return check_dir(run_dir, spark=spark, progress=lambda _m: None)["verdict"]


def oks(history, f):
    return [e for e in history if e.get("type") == "ok" and e.get("f") == f]


# --- every workload on the Java client ---------------------------------------------------


@pytest.mark.parametrize(
    "workload, args",
    [
        ("queue", ["--concurrency", "4", "--rate", "200", "--batch", "5"]),
        ("txn", ["--concurrency", "3", "--rate", "60", "--subscribe"]),
        ("eos", ["--concurrency", "4", "--rate", "100", "--keys", "4"]),
    ],
)
def test_a_workload_on_the_java_client_is_valid(lab, spark, tmp_path, workload, args):
    run_dir, test, history = gregor_run(lab, tmp_path, workload, 10, *args)
    assert verdict(spark, run_dir) == "valid"
    if workload == "queue":
        assert oks(history, "send") and any(e["mops"] for e in oks(history, "poll")) and oks(history, "commit")
        return
    assert test["transaction_protocol"]["protocol"] == "v2", test["transaction_protocol"]
    txns = oks(history, "txn")
    assert txns and all(isinstance(e.get("epoch"), int) for e in txns)
    if workload == "txn":
        by_process: dict = {}
        for event in txns:
            by_process.setdefault(event["process"], []).append(event["epoch"])
        # protocol v2: the epoch grows by one with every transaction, committed or aborted
        assert any(len(set(epochs)) > 1 for epochs in by_process.values()), by_process
        assert all(epochs == sorted(epochs) for epochs in by_process.values()), by_process
        assert any(m["f"] == "commit" for e in txns for m in e["mops"])  # send_offsets_to_transaction


def test_the_protocol_is_read_from_the_brokers_not_assumed(lab, tmp_path):
    """librdkafka on the same brokers (transaction.version=2) speaks the classic protocol,
    and the brokers' transaction log says so."""
    _, test, _ = gregor_run(lab, tmp_path, "txn", 5, "--concurrency", "2", "--rate", "40", client="librdkafka")
    assert test["setup"]["transaction.version"] == 2
    seen = test["transaction_protocol"]
    assert seen["protocol"] == "classic" and seen["transactional_ids"] == {"v2": 0, "classic": 2, "unknown": 0}, seen
    assert all(max(entry["client_transaction_versions"] or [0]) < 2 for entry in seen["per_id"].values())


def test_a_paused_java_producer_becomes_a_zombie_the_checker_sees_fenced(lab, spark, tmp_path):
    from checkers import passes
    from checkers.load import load as load_table

    run_dir, test, history = gregor_run(lab, tmp_path, "zombie", 30, "--concurrency", "2", "--rate", "30")
    assert test["transaction_protocol"]["protocol"] == "v2"
    pauses = [e for e in history if e["process"] == "nemesis" and e["f"] == "pause" and e["type"] == "info"]
    assert pauses and all(e["value"]["paused"] for e in pauses)
    fenced_ops = [e for e in history if e["type"] == "fail" and e["f"] == "txn" and e.get("error") in outcomes.FENCING]
    assert fenced_ops, "a resumed zombie's transaction must fail fenced"
    t = load_table(run_dir, spark)
    try:
        passes.main_params(t)
        seen = {z["op"] for z in t.cache["prior"]["fenced"]}
    finally:
        t.release()
    # the checker's fenced transactions are those that asked to commit (a fencing before, in
    # the body, is a transaction that never committed: nothing to judge)
    asked = {e["index"] for e in fenced_ops if "commit_time" in e}
    assert asked and asked <= seen, f"fenced after asking to commit: {sorted(asked)}; the checker saw {sorted(seen)}"
    assert verdict(spark, run_dir) == "valid"


def test_a_member_paused_past_its_session_timeout_is_evicted(lab, spark, tmp_path):
    """The pause stops the member's JVM too, so its heartbeats stop: the group rebalances
    while it is paused, and the others take its keys (as with librdkafka)."""
    run_dir, test, history = gregor_run(lab, tmp_path, "group", 25, "--concurrency", "4", "--rate", "100")
    pauses = [
        e
        for e in history
        if e["process"] == "nemesis" and e["f"] == "pause" and e["type"] == "info" and e["value"].get("paused")
    ]
    assert pauses, "the group conductor paused no member"
    evicted = 0
    for pause in pauses:
        member = pause["value"]["paused"][0]
        resume = next(
            e
            for e in history
            if e["process"] == "nemesis" and e["f"] == "resume" and e["type"] == "info" and e["index"] > pause["index"]
        )
        # its session (6 s) ends during the pause (8 s); nothing else moves the group then
        window = (pause["time"] + 3e9, resume["time"] + 1e9)
        evicted += any(
            e["process"] != member
            and window[0] < e["time"] < window[1]
            and any(r["type"] == "assigned" for r in e.get("rebalance") or [])
            for e in history
            if e.get("type") in ("ok", "fail")
        )
    assert evicted == len(pauses), f"{evicted} of {len(pauses)} paused members were evicted while paused"
    assert verdict(spark, run_dir) == "valid"


# --- the error mapping against the real exceptions -----------------------------------------


@pytest.fixture
def topic(lab) -> str:
    """A fresh topic of 3 partitions, replicated 3 times."""
    name = f"jt-{uuid.uuid4().hex[:8]}"
    lab.admin().create_topic(name, 3)
    return name


@pytest.fixture
def spec(lab):
    """What workloads/kafka_io.py builds its configs from, as a run passes it."""

    def make(**options):
        return SimpleNamespace(options=options, client_config={}, bootstrap=lab.bootstrap_servers, role="t", slot=0)

    return make


class Keys:
    """read_messages' key map: (topic, partition) -> partition number."""

    def __init__(self, topic: str):
        self.by_tp = {(topic, p): p for p in range(3)}

    def key_of(self, topic, partition):
        return self.by_tp.get((topic, partition))


def send(producer, topic, partition, values, reports):
    for value in values:
        producer.produce(
            topic,
            value=str(value).encode(),
            key=str(partition).encode(),
            partition=partition,
            on_delivery=lambda err, msg: reports.append((err, msg)),
        )


def read(consumer, topic, want, timeout_s=30.0):
    got: list = []
    end = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < end:
        mops, errs = read_messages(consumer.consume(num_messages=100, timeout=0.5), Keys(topic))
        assert not errs
        got += mops
    return got


def transactional(spec, txn_id):
    stats = StatsWatch()
    conf = producer_config(spec(), transactional_id=txn_id)
    conf["statistics.interval.ms"] = 1000
    conf["stats_cb"] = stats.on_stats
    return Producer(conf), stats


def committed_reader(spec, topic):
    consumer = Consumer(consumer_config(spec(), f"reader-{uuid.uuid4().hex[:6]}", isolation="read_committed"))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    return consumer


def ids_of(producer):
    found = producer.ids()
    return found["producer_id"], found["producer_epoch"]


def test_commit_and_abort_under_v2_bump_the_epoch_each_time(spec, topic):
    producer, stats = transactional(spec, f"jt-txn-{uuid.uuid4().hex[:6]}")
    producer.init_transactions(10)
    assert stats.wait_assigned(producer) == ids_of(producer)  # the statistics say the same as the driver
    ids = [ids_of(producer)]
    for outcome, values in [("commit", [1, 2]), ("abort", [3, 4]), ("commit", [5, 6])]:
        producer.begin_transaction()
        reports: list = []
        send(producer, topic, 0, values[:1], reports)
        send(producer, topic, 1, values[1:], reports)
        assert producer.flush(10) == 0 and all(err is None for err, _ in reports)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(10)
        ids.append(ids_of(producer))
    assert producer.ids()["txn_version"] == 2
    assert len({pid for pid, _ in ids}) == 1
    assert [epoch for _, epoch in ids] == [ids[0][1] + n for n in range(4)]
    reader = committed_reader(spec, topic)
    got = read(reader, topic, 4, timeout_s=20)
    time.sleep(1)
    got += read(reader, topic, 1, timeout_s=1)  # anything more would be the aborted pair
    reader.close()
    assert sorted(m["value"] for m in got) == [1, 2, 5, 6]


def test_a_second_instance_fences_the_first(spec, topic):
    txn_id = f"jt-fence-{uuid.uuid4().hex[:6]}"
    first, _ = transactional(spec, txn_id)
    first.init_transactions(10)
    first_ids = ids_of(first)
    first.begin_transaction()
    send(first, topic, 0, [7], [])
    assert first.flush(10) == 0
    second, _ = transactional(spec, txn_id)
    second.init_transactions(10)
    second_ids = ids_of(second)
    assert second_ids[0] == first_ids[0] and second_ids[1] > first_ids[1]
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(10)
    err = raised.value.args[0]
    assert err.name() in outcomes.FENCING and err.fatal(), err.java
    assert outcomes.classify(raised.value, outcomes.TXN_COMMIT).type == "fail"
    with pytest.raises(KafkaException) as again:
        first.abort_transaction(10)
    assert again.value.args[0].name() in outcomes.FENCING  # workloads/txn.py replaces the instance
    second.begin_transaction()
    send(second, topic, 0, [8], [])
    second.commit_transaction(10)
    reader = committed_reader(spec, topic)
    got = read(reader, topic, 1, timeout_s=20)
    time.sleep(1)
    got += read(reader, topic, 1, timeout_s=1)
    reader.close()
    assert [m["value"] for m in got] == [8]


def test_a_member_out_of_its_group_has_its_commit_refused(spec, topic):
    feeder = Producer(producer_config(spec()))
    for p in range(3):
        send(feeder, topic, p, range(3), [])
    assert feeder.flush(15) == 0
    group = f"jt-group-{uuid.uuid4().hex[:6]}"
    owned: dict = {"a": set(), "b": set()}

    def member(name, **extra):
        consumer = Consumer({**consumer_config(spec(), group), **extra})
        consumer.subscribe(
            [topic],
            on_assign=lambda c, parts: owned[name].update(p.partition for p in parts),
            on_revoke=lambda c, parts: owned[name].difference_update(p.partition for p in parts),
        )
        return consumer

    a = member("a", **{"max.poll.interval.ms": 6000})
    end = time.monotonic() + 30
    while owned["a"] != {0, 1, 2} and time.monotonic() < end:
        a.consume(num_messages=100, timeout=0.5)
    assert owned["a"] == {0, 1, 2}
    b = member("b")
    end = time.monotonic() + 40
    while owned["b"] != {0, 1, 2} and time.monotonic() < end:  # a stops polling: it leaves the group
        b.consume(num_messages=100, timeout=0.5)
    assert owned["b"] == {0, 1, 2}
    with pytest.raises(KafkaException) as raised:
        a.commit(offsets=[TopicPartition(topic, p, 1) for p in range(3)], asynchronous=False)
    assert raised.value.args[0].name() in outcomes.COMMIT_REJECTED, raised.value.args[0].java
    assert outcomes.classify(raised.value, outcomes.COMMIT).type == "fail"
    a.close()
    b.close()


@pytest.fixture
def cut(lab):
    """cut(): every node drops what this host sends it; healed after the test (or by heal())."""
    source = host_address(lab)

    def apply():
        for node in lab.nodes:
            node.prepare_network()
            node.drop_from([source])

    yield apply
    for node in lab.nodes:
        node.heal_network()


def test_deliveries_time_out_while_unreachable(spec, topic, cut):
    plain = Producer(producer_config(spec(**{"message.timeout.ms": 4000, "request.timeout.ms": 1500})))
    warm: list = []
    send(plain, topic, 2, [1], warm)
    assert plain.flush(15) == 0 and warm[0][0] is None
    cut()
    reports: list = []
    started = time.monotonic()
    send(plain, topic, 2, [2, 3], reports)
    assert plain.flush(20) == 0
    assert 3.5 < time.monotonic() - started < 12
    assert [err.name() for err, _ in reports] == ["_MSG_TIMED_OUT", "_MSG_TIMED_OUT"]
    assert [outcomes.classify(err, outcomes.SEND).type for err, _ in reports] == ["info", "info"]


def test_a_commit_times_out_while_unreachable_and_completes_when_retried(lab, spec, topic, cut):
    """The transaction may stay open 60 s (the coordinator would abort it at its timeout)."""
    producer, _ = transactional(lambda: spec(**{"transaction.timeout.ms": 60000}), f"jt-to-{uuid.uuid4().hex[:6]}")
    producer.init_transactions(10)
    producer.begin_transaction()
    send(producer, topic, 0, [9], [])
    assert producer.flush(10) == 0
    cut()
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(10)
    err = raised.value.args[0]
    assert err.name() == "_TIMED_OUT" and err.retriable() and not err.txn_requires_abort(), err.java
    # after three such attempts workloads/txn.py records an unknown outcome
    assert outcomes.classify(raised.value, outcomes.TXN_COMMIT, commit_attempted_before=True).type == "info"
    for node in lab.nodes:
        node.heal_network()
    producer.commit_transaction(10)  # the Java client resumes the pending commit
    reader = committed_reader(spec, topic)
    got = read(reader, topic, 1, timeout_s=20)
    reader.close()
    assert [m["value"] for m in got] == [9]


def host_address(lab) -> str:
    """The address this host's packets to the nodes come from."""
    out = subprocess.run(["ip", "-o", "route", "get", lab.nodes[0].address], capture_output=True, text=True).stdout
    words = out.split()
    return words[words.index("src") + 1]
