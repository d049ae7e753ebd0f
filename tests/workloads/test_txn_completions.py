"""TxnRunner: every completion repeats its invoke's sends, wherever the
transaction fails (docs/HISTORY.md; issue 14: a fenced instance's `fail`
completion carried no mops although its invoke had a send).

A unit test of one module: the producer is a stand-in that raises at the
step under test; the real one is exercised by the workload lab tests."""

import pytest

from workloads.client import Client, ClientSpec
from workloads.completions import with_unperformed_sends
from workloads.kafka_client import KafkaError, KafkaException
from workloads.kafka_io import KeyMap
from workloads.txn import TxnRunner, needs_new_instance

KEYS = {"0": ["t", 0], "1": ["t", 1]}
FENCED = KafkaException(KafkaError(KafkaError._FENCED, fatal=True))


class Link:
    def __init__(self):
        self.events = []

    def now_ns(self):
        return len(self.events)

    def emit(self, event):
        self.events.append(event)


class Message:
    def __init__(self, offset):
        self._offset = offset

    def offset(self):
        return self._offset


class Producer:
    """Raises `error` at `step` (begin, produce, flush, commit, abort); delivers otherwise."""

    def __init__(self, step=None, error=FENCED):
        self.step, self.error, self.pending, self.next_offset = step, error, [], 10

    def _maybe(self, step):
        if self.step == step:
            raise self.error

    def begin_transaction(self):
        self._maybe("begin")

    def produce(self, topic, value, key, partition, on_delivery):
        self._maybe("produce")
        self.pending.append(on_delivery)

    def poll(self, _timeout):
        return 0

    def flush(self, _timeout):
        self._maybe("flush")
        for callback in self.pending:
            callback(None, Message(self.next_offset))
            self.next_offset += 1
        self.pending = []
        return 0

    def commit_transaction(self, _timeout):
        self._maybe("commit")

    def abort_transaction(self, _timeout):
        self._maybe("abort")


class Instance:
    def __init__(self, producer, ids=None):
        self.producer, self.txn_id, self.unusable, self._ids = producer, "tx", None, ids or {}

    def ids(self):
        return dict(self._ids)


def run_one(producer, abort=False, ids=None):
    spec = ClientSpec(
        slot=0,
        process=0,
        role="txn",
        module="workloads.txn",
        stride=1,
        seed=0,
        keys=[0, 1],
        key_map=KEYS,
        bootstrap="unused",
        options={},
        start_ns=0,
        deadline=0,
    )
    link = Link()
    client = Client(spec, link)
    mops = [{"f": "send", "key": 0, "value": 3}, {"f": "poll"}, {"f": "send", "key": 1, "value": 4}]
    tp = Instance(producer, ids)
    done = TxnRunner(client, KeyMap(KEYS)).run(tp, mops, abort)
    return [e for e in link.events if "type" in e], done, tp  # history events, not the pool's messages


def sends(event):
    return [(m["key"], m["value"]) for m in event.get("mops") or () if m["f"] == "send"]


@pytest.mark.parametrize("step", [None, "begin", "produce", "flush", "commit"])
def test_every_completion_repeats_the_invoke_sends(step):
    events, done, _ = run_one(Producer(step))
    invoke, completion = events
    assert sends(completion) == sends(invoke) == [(0, 3), (1, 4)]
    assert completion["type"] == ("ok" if step is None else "fail")


@pytest.mark.parametrize("step", [None, "produce", "commit"])
def test_a_completion_carries_the_ids_its_transaction_ran_under(step):
    """Read once begin_transaction returned (under protocol v2 the epoch grows with every
    transaction); a transaction whose begin failed names none."""
    _, done, _ = run_one(Producer(step), ids={"producer_id": 7, "epoch": 12})
    assert (done["producer_id"], done["epoch"]) == (7, 12)
    _, begun_not, _ = run_one(Producer("begin"), ids={"producer_id": 7, "epoch": 12})
    assert "epoch" not in begun_not and "producer_id" not in begun_not


def test_a_fenced_begin_fails_with_the_sends_listed_and_no_offset():
    events, done, _ = run_one(Producer("begin"))
    assert done["error"] == "_FENCED"
    assert [m.get("offset") for m in done["mops"]] == [None, None]


def test_an_abort_that_finds_the_instance_fenced_retires_it():
    events, done, tp = run_one(Producer("abort"), abort=True)
    assert done["error"] == "aborted-on-purpose" and sends(done) == [(0, 3), (1, 4)]
    assert tp.unusable == "_FENCED"
    assert needs_new_instance(done, tp)
    assert not needs_new_instance(done, Instance(Producer()))


def test_unperformed_sends_follow_the_performed_ones_in_invoke_order():
    done = [{"f": "poll", "key": 1, "offset": 0, "value": 9}, {"f": "send", "key": 1, "value": 4, "offset": 7}]
    invoke = [
        {"f": "send", "key": 0, "value": 3},
        {"f": "poll"},
        {"f": "send", "key": 1, "value": 4},
        {"f": "send", "key": 0, "value": 5},
    ]
    assert with_unperformed_sends(done, invoke) == done + [
        {"f": "send", "key": 0, "value": 3},
        {"f": "send", "key": 0, "value": 5},
    ]
