"""The moments the hang conductor picks, and the zombie's activation message
(unit tests of one module each; the pool is a stand-in), and that a
conductor's faults and the nemesis's never interleave in the history."""

import json
import random
import threading
import time
import types

from nemesis.faults import Nemesis
from workloads.conductor import ClientFaults
from workloads.context import RunContext
from workloads.history_writer import HistoryWriter
from workloads.txn import HangConductor
from workloads.zombie import ACTIVATE, activation


class Pool:
    def __init__(self, pending, acknowledged=False):
        self._pending, self.acknowledged = pending, acknowledged

    def pending(self, slot):
        return self._pending

    def writes_acknowledged(self, slot):
        return self._pending is not None and self.acknowledged


def conductor(pool, where):
    return HangConductor(faults=None, pool=pool, slots=[0], seed=1, where=where, hang_s=1.0)


def test_inside_waits_for_a_transaction_whose_writes_are_acknowledged():
    assert conductor(Pool({"f": "txn"}, acknowledged=True), "inside").wait_for_moment(0, within_s=5.0)
    assert not conductor(Pool({"f": "txn"}), "inside").wait_for_moment(0, within_s=0.05)
    assert not conductor(Pool(None), "inside").wait_for_moment(0, within_s=0.05)


def test_between_waits_for_no_op_in_flight():
    assert conductor(Pool(None), "between").wait_for_moment(0, within_s=5.0)
    assert not conductor(Pool({"f": "txn"}, acknowledged=True), "between").wait_for_moment(0, within_s=0.05)


def test_an_activation_may_carry_the_sends_to_do_first():
    sends = [{"f": "send", "key": 1, "value": 5}]
    inbox = ["other", (ACTIVATE, sends)]
    assert activation(inbox) == sends and inbox == ["other"]
    inbox = [ACTIVATE]
    assert activation(inbox) == [] and inbox == []
    assert activation(["other"]) is None


class KillPool:
    """Stands in for ClientPool: a kill replaces process 7 by 8 after a while."""

    def process_of(self, slot):
        return 7

    def kill_and_replace(self, slot):
        time.sleep(0.05)
        return 7, 8


def test_a_conductor_never_records_inside_a_nemesis_op(tmp_path):
    """Both record as process "nemesis", which never has two ops in flight:
    a conductor's kill waits for the nemesis's op in progress to complete."""
    writer = HistoryWriter(str(tmp_path / "history.jsonl"))
    ctx = RunContext(types.SimpleNamespace(nodes=[]), {}, writer, lambda: [])
    nemesis = Nemesis(ctx, ledger=None, rng=random.Random(0))
    assert nemesis.op_lock is ctx.nemesis_op
    faults = ClientFaults(KillPool(), ctx.record, ledger=None, op_lock=ctx.nemesis_op)
    with nemesis.op_lock:
        nemesis._record("invoke", "start-partition", {"nodes": ["n1"]})
        killer = threading.Thread(target=faults.kill, args=(0, "test"))
        killer.start()
        time.sleep(0.2)
        nemesis._record("info", "start-partition", {"nodes": ["n1"]})
    killer.join(timeout=5)
    events = [json.loads(line) for line in open(tmp_path / "history.jsonl")]
    assert [(e["type"], e["f"]) for e in events] == [
        ("invoke", "start-partition"),
        ("info", "start-partition"),
        ("invoke", "kill-client"),
        ("info", "kill-client"),
    ]
