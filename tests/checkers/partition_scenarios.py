"""Scenarios for the per-partition and order finders, each on its own key and processes.

Every scenario has a `present` flavour (the anomaly is there) and a
near-identical `absent` one. All scenarios of one flavour share a single
history, so one Spark load checks them all; keys and processes never overlap,
so they cannot disturb one another. Each builder returns what the test
expects: (key, value, offset, ops) of the instance.
"""

from __future__ import annotations

from checker_histories import History, poll, send

LATE = 10**15  # a commit_time after every read


def inconsistent_offsets(h: History, k: int, p: int, present: bool):
    a = h.op(p, "send", [send(k, 1, 0)])
    b = h.op(p, "send", [send(k, 2, 0 if present else 1)])
    c = h.op(p + 1, "poll", [poll(k, 0, 1)])
    return {"key": k, "values": [1, 2], "offset": 0, "ops": [a, b, c]}


def duplicate(h: History, k: int, p: int, present: bool):
    a = h.op(p, "send", [send(k, 1, 0)])
    h.op(p, "send", [send(k, 2, 1)])
    reads = [poll(k, 0, 1), poll(k, 1, 2)] + ([poll(k, 2, 1)] if present else [])
    c = h.op(p + 1, "poll", reads)
    return {"key": k, "value": 1, "offsets": [0, 2], "ops": [a, c]}


def lost_write(h: History, k: int, p: int, present: bool):
    a = h.op(p, "send", [send(k, 1, 0)])
    h.op(p, "send", [send(k, 2, 1)])
    reads = ([] if present else [poll(k, 0, 1)]) + [poll(k, 1, 2)]
    c = h.op(p + 1, "poll", reads)
    return {"key": k, "value": 1, "offset": 0, "ops": [a, c]}


def unseen(h: History, k: int, p: int, present: bool):
    h.op(p, "send", [send(k, 1, 0)])
    b = h.op(p, "send", [send(k, 2, 1)])
    reads = [poll(k, 0, 1)] + ([] if present else [poll(k, 1, 2)])
    h.op(p + 1, "poll", reads)
    return {"key": k, "value": 2, "offset": 1, "ops": [b]}


def unseen_without_offset(h: History, k: int, p: int, present: bool):
    """An ok send whose reply had no offset, that no one read: unseen, never lost."""
    h.op(p, "send", [send(k, 1, 0)])
    b = h.op(p, "send", [send(k, 2)])
    reads = [poll(k, 0, 1)] + ([] if present else [poll(k, 1, 2)])
    h.op(p + 1, "poll", reads)
    return {"key": k, "value": 2, "offset": None, "ops": [b]}


def aborted_read(h: History, k: int, p: int, present: bool):
    a = h.op(p, "send", [send(k, 1)], type="fail", error="NOT_ENOUGH_REPLICAS")
    # absent: the only reader is itself a fail op, whose reads do not count.
    c = h.op(
        p + 1, "poll", [poll(k, 0, 1)], type="ok" if present else "fail", **({} if present else {"error": "TIMED_OUT"})
    )
    return {"key": k, "value": 1, "offset": 0, "ops": [a, c]}


def aborted_read_txn(h: History, k: int, p: int, present: bool):
    a = h.op(
        p,
        "txn",
        [send(k, 1), send(k, 2)],
        type="fail" if present else "ok",
        txn_id="t-a",
        **({"error": "ABORTED"} if present else {"commit_time": 0}),
    )
    c = h.op(p + 1, "poll", [poll(k, 0, 1), poll(k, 1, 2)])
    return {"key": k, "value": 1, "offset": 0, "ops": [a, c]}


def uncommitted_read(h: History, k: int, p: int, present: bool):
    a = h.op(p, "txn", [send(k, 1, 0)], txn_id="t-u", commit_time=LATE if present else 0)
    c = h.op(p + 1, "poll", [poll(k, 0, 1)])
    return {"key": k, "value": 1, "offset": 0, "ops": [a, c]}


def precommitted_read(h: History, k: int, p: int, present: bool):
    if present:
        a = h.op(p, "txn", [send(k, 1, 0), poll(k, 0, 1)], txn_id="t-p", commit_time=0)
    else:
        a = h.op(p, "txn", [send(k, 1, 0)], txn_id="t-p", commit_time=0)
        h.op(p, "poll", [poll(k, 0, 1)])
    return {"key": k, "value": 1, "offset": 0, "ops": [a]}


def _three_sends(h: History, k: int, p: int):
    return h.op(p, "txn", [send(k, 1, 0), send(k, 2, 1), send(k, 3, 2)], txn_id=f"t{k}", commit_time=0)


def poll_skip(h: History, k: int, p: int, present: bool):
    _three_sends(h, k, p)
    a = h.op(p + 1, "poll", [poll(k, 0, 1)])
    if not present:
        h.op(p + 1, "assign", keys=[k])
    b = h.op(p + 1, "poll", [poll(k, 2, 3)])
    return {"key": k, "value": 3, "offset": 2, "ops": [a, b]}


def poll_skip_rebalance(h: History, k: int, p: int, present: bool):
    _three_sends(h, k, p)
    a = h.op(p + 1, "poll", [poll(k, 0, 1)])
    extra = {} if present else {"rebalance": [{"type": "assigned", "keys": [k]}]}
    b = h.op(p + 1, "poll", [poll(k, 2, 3)], **extra)
    return {"key": k, "value": 3, "offset": 2, "ops": [a, b]}


def nonmonotonic_poll(h: History, k: int, p: int, present: bool):
    _three_sends(h, k, p)
    a = h.op(p + 1, "poll", [poll(k, 0, 1), poll(k, 1, 2), poll(k, 2, 3)])
    if not present:
        h.op(p + 1, "subscribe", keys=[k], type="fail", error="UNKNOWN")
    b = h.op(p + 1, "poll", [poll(k, 1, 2)])
    return {"key": k, "value": 2, "offset": 1, "ops": [a, b]}


def int_poll_skip(h: History, k: int, p: int, present: bool):
    _three_sends(h, k, p)
    extra = {} if present else {"rebalance": [{"type": "revoked", "keys": [k]}]}
    a = h.op(p + 1, "poll", [poll(k, 0, 1), poll(k, 2, 3)], **extra)
    h.op(p + 2, "poll", [poll(k, 1, 2)])
    return {"key": k, "value": 3, "offset": 2, "ops": [a]}


def int_nonmonotonic_poll(h: History, k: int, p: int, present: bool):
    _three_sends(h, k, p)
    extra = {} if present else {"rebalance": [{"type": "assigned", "keys": [k]}]}
    a = h.op(p + 1, "poll", [poll(k, 1, 2), poll(k, 0, 1)], **extra)
    h.op(p + 2, "poll", [poll(k, 2, 3)])
    return {"key": k, "value": 1, "offset": 0, "ops": [a]}


def nonmonotonic_send(h: History, k: int, p: int, present: bool):
    a = h.op(p, "send", [send(k, 1, 1)])
    if not present:
        h.op(p, "assign", keys=[k])
    b = h.op(p, "send", [send(k, 2, 0)])
    h.op(p + 1, "poll", [poll(k, 0, 2), poll(k, 1, 1)])
    return {"key": k, "value": 2, "offset": 0, "ops": [a, b]}


def int_send_skip(h: History, k: int, p: int, present: bool):
    h.op(p + 2, "send", [send(k, 9, 1 if present else 2)])
    a = h.op(p, "txn", [send(k, 1, 0), send(k, 2, 2 if present else 1)], txn_id=f"t{k}", commit_time=0)
    reads = [poll(k, 0, 1), poll(k, 1, 9), poll(k, 2, 2)] if present else [poll(k, 0, 1), poll(k, 1, 2), poll(k, 2, 9)]
    h.op(p + 1, "poll", reads)
    return {"key": k, "value": 2, "offset": 2, "ops": [a]}


def int_nonmonotonic_send(h: History, k: int, p: int, present: bool):
    offsets = (1, 0) if present else (0, 1)
    a = h.op(p, "txn", [send(k, 1, offsets[0]), send(k, 2, offsets[1])], txn_id=f"t{k}", commit_time=0)
    h.op(p + 1, "poll", [poll(k, 0, 2 if present else 1), poll(k, 1, 1 if present else 2)])
    return {"key": k, "value": 2, "offset": offsets[1], "ops": [a]}


SCENARIOS = {
    "inconsistent-offsets": inconsistent_offsets,
    "duplicate": duplicate,
    "lost-write": lost_write,
    "unseen": unseen,
    "unseen-without-offset": unseen_without_offset,
    "aborted-read": aborted_read,
    "aborted-read-txn": aborted_read_txn,
    "uncommitted-read": uncommitted_read,
    "precommitted-read": precommitted_read,
    "poll-skip": poll_skip,
    "poll-skip-rebalance": poll_skip_rebalance,
    "nonmonotonic-poll": nonmonotonic_poll,
    "int-poll-skip": int_poll_skip,
    "int-nonmonotonic-poll": int_nonmonotonic_poll,
    "nonmonotonic-send": nonmonotonic_send,
    "int-send-skip": int_send_skip,
    "int-nonmonotonic-send": int_nonmonotonic_send,
}


def build(present: bool):
    """One history holding every scenario; returns (History, {scenario: expected})."""
    h = History()
    expected = {}
    for number, (name, builder) in enumerate(SCENARIOS.items()):
        expected[name] = builder(h, number, 10 * number, present)
    return h, expected


def anomaly_name(scenario: str) -> str:
    for suffix in ("-without-offset", "-txn", "-rebalance"):
        if scenario.endswith(suffix):
            return scenario[: -len(suffix)]
    return scenario
