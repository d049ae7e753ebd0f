"""Generators: reproducible from the seed, values unique per key across clients."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.generators import GENERATION_BLOCK, Pacer, Plans, ValueSource


def test_the_same_seed_slot_and_generation_give_the_same_plans():
    a = Plans(7, 2, 4, [0, 1, 2, 3])
    b = Plans(7, 2, 4, [0, 1, 2, 3])
    assert [a.txn() for _ in range(50)] == [b.txn() for _ in range(50)]
    assert a.sends(10) == b.sends(10)


def test_another_seed_gives_other_plans():
    a = Plans(7, 2, 4, list(range(8)))
    b = Plans(8, 2, 4, list(range(8)))
    assert a.sends(20) != b.sends(20)


@settings(max_examples=50, deadline=None)
@given(stride=st.integers(1, 12), generations=st.integers(1, 3), count=st.integers(1, 200))
def test_values_are_unique_across_slots_and_generations(stride, generations, count):
    seen = set()
    for slot in range(stride):
        for generation in range(generations):
            source = ValueSource(slot, stride, generation)
            for _ in range(count):
                value = source.next()
                assert value not in seen
                seen.add(value)


def test_a_replaced_client_starts_a_fresh_block():
    assert ValueSource(1, 4, generation=1).next() == 1 + 4 * GENERATION_BLOCK


def test_a_txn_plan_has_one_to_four_mops_and_at_least_one_send():
    plans = Plans(1, 0, 1, [0, 1, 2])
    for _ in range(300):
        plan = plans.txn()
        assert 1 <= len(plan.mops) <= 5
        assert any(m["f"] == "send" for m in plan.mops)
        assert all(m["f"] in ("send", "poll") for m in plan.mops)


def test_some_transactions_are_aborted_on_purpose_and_most_are_not():
    plans = Plans(1, 0, 1, [0], abort_ratio=0.1)
    aborts = sum(plans.txn().abort for _ in range(1000))
    assert 40 < aborts < 200


class FakeClock:
    """time for Pacer, advanced only by sleeps (its own, and the test's as a
    stall): the test measures the pacing, not how busy the machine is."""

    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    import workloads.generators as generators

    fake = FakeClock()
    monkeypatch.setattr(generators, "time", fake)
    return fake


def test_a_pacer_spaces_ops_at_the_rate(clock):
    pacer = Pacer(256.0)  # an interval (1/256 s) that floats hold exactly
    start = clock.monotonic()
    ops = 0
    while pacer.wait(start + 0.25):
        ops += 1
    assert ops == 64


def test_a_pacer_does_not_burst_after_a_stall(clock):
    """It banks at most one interval of debt: after a 1 s stall, one op at once, then the rate again."""
    pacer = Pacer(100.0)
    assert pacer.wait(clock.monotonic() + 10)
    clock.sleep(1.0)  # the stall
    times = []
    for _ in range(4):
        assert pacer.wait(clock.monotonic() + 10)
        times.append(clock.monotonic())
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:])]
    assert gaps == [0.0, 0.01, 0.01], gaps
