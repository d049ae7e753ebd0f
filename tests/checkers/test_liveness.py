"""stuck-lso: a read_committed consumer polling a key all along sees a value only after the txn timeout."""

from __future__ import annotations

import pytest
from txn_events import op, poll, send

from checkers import liveness
from checkers.load import load

pytestmark = pytest.mark.spark

SECOND = 1_000_000_000


def timed(events_with_times):
    """Sets `time` on each pair: [(pair, invoke_time, complete_time), ...]."""
    events = []
    for (invoke, completion), start, end in events_with_times:
        events += [dict(invoke, time=start), dict(completion, time=end)]
    return events


def stuck_run(poll_every_s: float, read_at_s: float = 13):
    """Write acked at 1 s; consumer p1 (assigned key 0) polls empty every `poll_every_s`, reads at `read_at_s`."""
    pairs = [
        (op(1, "assign", [], keys=[0]), 0, 100),
        (op(0, "txn", [send(0, 1, 0)], txn_id="a", commit_time=SECOND // 2), SECOND // 4, SECOND),
    ]
    t = 1.0
    while t + poll_every_s < read_at_s:
        t += poll_every_s
        pairs.append((op(1, "poll", []), int(t * SECOND) - 1000, int(t * SECOND)))
    pairs.append((op(1, "poll", [poll(0, 0, 1)]), int(read_at_s * SECOND), int(read_at_s * SECOND) + 1000))
    events = timed(pairs)
    return sorted(events, key=lambda e: e["time"])


def found(spark, tmp_path, write_run, events, test=None):
    return [
        (r["name"], r["key"], r["value"], r["offset"], r["ops"])
        for r in liveness.find(load(write_run(tmp_path, events, test), spark)).collect()
    ]


def test_stuck_lso_when_polls_cover_the_whole_timeout(spark, tmp_path, write_run):
    events = stuck_run(poll_every_s=2)
    writer = next(i for i, e in enumerate(events) if e["type"] == "ok" and e["f"] == "txn")
    reader = len(events) - 1
    assert found(spark, tmp_path, write_run, events) == [("stuck-lso", 0, 1, 0, [writer, reader])]


def test_no_stuck_lso_when_polls_leave_a_gap_over_half_the_timeout(spark, tmp_path, write_run):
    assert found(spark, tmp_path, write_run, stuck_run(poll_every_s=6)) == []


def test_no_stuck_lso_when_read_within_the_timeout(spark, tmp_path, write_run):
    assert found(spark, tmp_path, write_run, stuck_run(poll_every_s=2, read_at_s=9)) == []


def test_no_stuck_lso_under_read_uncommitted(spark, tmp_path, write_run, base_test):
    test = base_test(client={"isolation.level": "read_uncommitted"})
    assert found(spark, tmp_path, write_run, stuck_run(poll_every_s=2), test) == []


def group_run(rebalanced: bool):
    """A subscribed member assigned key 0 polls empty every 2 s and reads the
    write (acked at 1 s) at 13 s. With `rebalanced`, the group revokes key 0
    at 3 s and its rebalance is blocked (a member is paused) until 11 s: the
    member keeps completing polls, but not of key 0."""
    assigned = [{"type": "assigned", "keys": [0]}]
    pairs = [
        (op(1, "subscribe", [], keys=[0], group="g"), 0, 100),
        (op(1, "poll", [], group="g", rebalance=assigned), SECOND // 4, SECOND // 2),
        (op(0, "txn", [send(0, 1, 0)], txn_id="a", commit_time=SECOND // 2), SECOND // 4, SECOND),
    ]
    for at in (3, 5, 7, 9, 11):
        fields = {"group": "g"}
        if rebalanced and at == 3:
            fields["rebalance"] = [{"type": "revoked", "keys": [0]}]
        if rebalanced and at == 11:
            fields["rebalance"] = assigned
        pairs.append((op(1, "poll", [], **fields), at * SECOND - 1000, at * SECOND))
    pairs.append((op(1, "poll", [poll(0, 0, 1)], group="g"), 13 * SECOND, 13 * SECOND + 1000))
    return sorted(timed(pairs), key=lambda e: e["time"])


def test_stuck_lso_when_the_member_polls_its_assigned_key_throughout(spark, tmp_path, write_run, base_test):
    events = group_run(rebalanced=False)
    test = base_test(client={"subscribe": True})
    assert [row[0] for row in found(spark, tmp_path, write_run, events, test)] == ["stuck-lso"]


def test_no_stuck_lso_when_a_blocked_rebalance_took_the_key_away(spark, tmp_path, write_run, base_test):
    """Revoked from key 0 and waiting on a paused member, it polls nothing of key 0."""
    test = base_test(client={"subscribe": True})
    assert found(spark, tmp_path, write_run, group_run(rebalanced=True), test) == []


def flapping_run(rebalances: dict):
    """A subscribed member polls empty every second from 2 s to 12 s and reads
    the write (acked at 1 s) at 13 s. `rebalances`: seconds (a poll's
    completion, or a fraction of a second before the ack) -> the `rebalance`
    entries of the poll that ends then."""
    assigned = [{"type": "assigned", "keys": [0]}]
    pairs = [
        (op(1, "subscribe", [], keys=[0], group="g"), 0, 100),
        (op(1, "poll", [], group="g", rebalance=assigned), SECOND // 4, SECOND // 2),
        (op(0, "txn", [send(0, 1, 0)], txn_id="a", commit_time=SECOND // 2), SECOND // 4, SECOND),
    ]
    for at in sorted(rebalances):
        if at < 1:
            pairs.append(
                (op(1, "poll", [], group="g", rebalance=rebalances[at]), int(at * SECOND) - 1000, int(at * SECOND))
            )
    for at in range(2, 13):
        fields = {"group": "g"}
        if at in rebalances:
            fields["rebalance"] = rebalances[at]
        pairs.append((op(1, "poll", [], **fields), at * SECOND - 1000, at * SECOND))
    pairs.append((op(1, "poll", [poll(0, 0, 1)], group="g"), 13 * SECOND, 13 * SECOND + 1000))
    return sorted(timed(pairs), key=lambda e: e["time"])


def test_no_stuck_lso_when_rebalances_kept_taking_the_key_away(spark, tmp_path, write_run, base_test):
    """Revoked from key 0 from 3 s to 6 s and from 8 s to 11 s: each stretch
    is shorter than half the timeout, but the member held key 0 for 3 s of
    the 12, so it did not poll it throughout."""
    revoked, assigned = [{"type": "revoked", "keys": [0]}], [{"type": "assigned", "keys": [0]}]
    events = flapping_run({3: revoked, 6: assigned, 8: revoked, 11: assigned})
    test = base_test(client={"subscribe": True})
    assert found(spark, tmp_path, write_run, events, test) == []


def test_stuck_lso_when_the_key_came_back_before_the_interval(spark, tmp_path, write_run, base_test):
    """A rebalance took key 0 away and gave it back before the write was
    acknowledged; from then on the member held it and polled it all along."""
    revoked, assigned = [{"type": "revoked", "keys": [0]}], [{"type": "assigned", "keys": [0]}]
    events = flapping_run({0.6: revoked, 0.8: assigned})
    test = base_test(client={"subscribe": True})
    assert [row[0] for row in found(spark, tmp_path, write_run, events, test)] == ["stuck-lso"]


def catch_up_run(per_poll: int):
    """Process 0 writes 12 values of key 0 (offsets 0..11), the last acked at
    1 s. Process 1, assigned from the beginning, polls every second from 2 s
    and reads the 11 older values back `per_poll` at a time (1: a replacement
    catching up until 12 s, as the txn workload's do after a kill-client; 11:
    caught up at 2 s), then polls empty, and reads the last value at 13 s."""
    pairs = [(op(1, "assign", [], keys=[0]), 0, 100)]
    ms = SECOND // 1000
    for value in range(11):
        pairs.append(
            (
                op(0, "txn", [send(0, value, value)], txn_id="a", commit_time=(20 * value + 15) * ms),
                (20 * value + 10) * ms,
                (20 * value + 20) * ms,
            )
        )
    pairs.append((op(0, "txn", [send(0, 11, 11)], txn_id="a", commit_time=SECOND // 2), SECOND // 4, SECOND))
    older = list(range(11))
    for at in range(2, 13):
        mops = [poll(0, v, v) for v in older[:per_poll]]
        older = older[per_poll:]
        pairs.append((op(1, "poll", mops), at * SECOND - 1000, at * SECOND))
    pairs.append((op(1, "poll", [poll(0, 11, 11)]), 13 * SECOND, 13 * SECOND + 1000))
    return sorted(timed(pairs), key=lambda e: e["time"])


def test_no_stuck_lso_for_a_consumer_still_reading_older_records_of_the_key(spark, tmp_path, write_run):
    """Behind, not held back: its polls kept returning older records of the
    key until 12 s, so it waited 1 s for the last value, not 12."""
    assert found(spark, tmp_path, write_run, catch_up_run(per_poll=1)) == []


def test_stuck_lso_counts_from_the_readers_previous_read_of_the_key(spark, tmp_path, write_run):
    """Caught up at 2 s, then 11 s of empty polls before the last value: stuck."""
    rows = found(spark, tmp_path, write_run, catch_up_run(per_poll=11))
    assert [(name, key, value) for name, key, value, _, _ in rows] == [("stuck-lso", 0, 11)]
