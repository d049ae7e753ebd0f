"""The eos copier tells the pool when it is inside its window (between its
two commits), so the nemesis target `client:copier:window` can aim there.

A unit test of workloads/eos.py: the Kafka producer and consumer are
stand-ins that succeed; the real copiers run in the eos lab tests and in the
catalogue's eos-commit-after and eos-commit-before claims."""

import time

import pytest

from workloads.client import ClientSpec
from workloads.eos import CopierClient
from workloads.generators import Plans
from workloads.kafka_io import KeyMap
from workloads.txn import TxnRunner

KEYS = {"0": ["t", 0], "1": ["t", 1]}
POLLED = [{"f": "poll", "key": 0, "offset": 4, "value": 40}, {"f": "poll", "key": 0, "offset": 5, "value": 41}]


class Link:
    def __init__(self):
        self.events = []

    def now_ns(self):
        return time.monotonic_ns()

    def emit(self, event):
        self.events.append(event)


class Delivered:
    def __init__(self, offset):
        self._offset = offset

    def offset(self):
        return self._offset


class Producer:
    def __init__(self):
        self.pending = []

    def begin_transaction(self):
        pass

    def produce(self, topic, value, key, partition, on_delivery):
        self.pending.append(on_delivery)

    def poll(self, _timeout):
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        pass

    def flush(self, _timeout):
        for offset, callback in enumerate(self.pending):
            callback(None, Delivered(offset))
        self.pending = []
        return 0

    def commit_transaction(self, _timeout):
        pass


class Instance:
    def __init__(self):
        self.producer, self.txn_id, self.unusable = Producer(), "tx-copier", None

    def ids(self) -> dict:
        return {}  # the producer id and epoch, as a statistics callback gives them: none here


class Committed:
    error = None


class Consumer:
    def commit(self, offsets, asynchronous):
        return [Committed() for _ in offsets]

    def consumer_group_metadata(self):
        return "metadata"


class Assigned:
    assigned = {0, 1}

    def take(self):
        return []


def copier(mode, process_ms=0):
    spec = ClientSpec(
        slot=2,
        process=2,
        role="copier",
        module="workloads.eos",
        stride=3,
        seed=0,
        keys=[0],
        key_map=KEYS,
        bootstrap="unused",
        options={"copier.offsets": mode, "process.ms": process_ms},
        start_ns=0,
        deadline=0,
        txn_id="tx-copier",
        group="copiers",
        extra={"out_offset": 1},
    )
    client = CopierClient(spec, Link())
    client.keymap = KeyMap(KEYS)
    client.plans = Plans.for_spec(spec, default_abort_ratio=0.0)
    client.out_offset, client.rebalance, client.consumer, client.tp = 1, Assigned(), Consumer(), Instance()
    client.runner = TxnRunner(client, client.keymap)

    def poll_op():
        client.invoke("poll", [{"f": "poll"}], group="copiers")
        client.complete("ok", POLLED)
        return POLLED

    client.poll_op = poll_op
    return client


def trace(client):
    """The copier's events as short names: history ops and its window."""
    names = []
    for event in client.link.events:
        if "_window" in event:
            names.append("enter" if event["_window"] is not None else "leave")
        elif "_committing" in event:
            names.append("committing")
        elif "type" in event:
            names.append(f"{event['f']}:{event['type']}")
    return names


@pytest.mark.parametrize(
    "mode, expected",
    [
        # outputs committed, offsets not yet
        ("after", ["poll:invoke", "poll:ok", "txn:invoke", "committing", "txn:ok", "enter", "commit:invoke"]),
        # offsets committed, outputs not yet
        ("before", ["poll:invoke", "poll:ok", "commit:invoke", "commit:ok", "enter", "txn:invoke", "committing"]),
        # outputs written and offsets sent, both committing together
        ("txn", ["poll:invoke", "poll:ok", "txn:invoke", "enter", "committing", "txn:ok", "leave"]),
    ],
)
def test_a_copier_reports_its_window_between_its_two_commits(mode, expected):
    client = copier(mode)
    done = client.copy(mode, abort=False)
    assert done["type"] == "ok"
    names = trace(client)
    assert names[: len(expected)] == expected, names
    assert names.count("enter") == 1 and names[-1] == "leave", names
    commits = [e for e in client.link.events if e.get("f") == "commit" and e.get("type") == "ok"]
    txns = [e for e in client.link.events if e.get("f") == "txn" and e.get("type") == "ok"]
    if mode == "txn":
        assert not commits and {"f": "commit", "key": 0, "offset": 6} in txns[0]["mops"]
    else:
        assert commits[0]["mops"] == [{"f": "commit", "key": 0, "offset": 6}]


@pytest.mark.parametrize("mode", ["after", "before", "txn"])
def test_a_copier_works_process_ms_inside_its_window(mode):
    client = copier(mode, process_ms=80)
    client.copy(mode, abort=False)
    events = client.link.events
    at = next(i for i, e in enumerate(events) if e.get("_window") is not None)
    entered = events[at]["_window"]
    resumed = next(e.get("time") or e.get("_committing") for e in events[at + 1 :] if "time" in e or "_committing" in e)
    assert resumed - entered >= 80_000_000  # what it does next comes process.ms later


def test_a_copier_with_nothing_polled_never_enters_its_window():
    client = copier("after")
    client.poll_op = lambda: []
    assert client.copy("after", abort=False) is None
    assert "enter" not in trace(client)
