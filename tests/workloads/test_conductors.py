"""The moments the hang conductor picks, and the zombie's activation message
(unit tests of one module each; the pool is a stand-in)."""

from workloads.txn import HangConductor
from workloads.zombie import ACTIVATE, activation


class Pool:
    def __init__(self, pending, age_s):
        self._pending, self.age_s = pending, age_s

    def pending(self, slot):
        return self._pending

    def pending_for_s(self, slot):
        return self.age_s if self._pending else 0.0


def conductor(pool, where):
    return HangConductor(faults=None, pool=pool, slots=[0], seed=1, where=where, hang_s=1.0)


def test_inside_waits_for_a_transaction_that_has_sent_its_writes():
    assert conductor(Pool({"f": "txn"}, 0.05), "inside").wait_for_moment(0, within_s=0.05)
    assert not conductor(Pool({"f": "txn"}, 0.0), "inside").wait_for_moment(0, within_s=0.05)
    assert not conductor(Pool({"f": "init"}, 1.0), "inside").wait_for_moment(0, within_s=0.05)
    assert not conductor(Pool(None, 0.0), "inside").wait_for_moment(0, within_s=0.05)


def test_between_waits_for_no_op_in_flight():
    assert conductor(Pool(None, 0.0), "between").wait_for_moment(0, within_s=0.05)
    assert not conductor(Pool({"f": "txn"}, 1.0), "between").wait_for_moment(0, within_s=0.05)


def test_an_activation_may_carry_the_sends_to_do_first():
    sends = [{"f": "send", "key": 1, "value": 5}]
    inbox = ["other", (ACTIVATE, sends)]
    assert activation(inbox) == sends and inbox == ["other"]
    inbox = [ACTIVATE]
    assert activation(inbox) == [] and inbox == []
    assert activation(["other"]) is None
