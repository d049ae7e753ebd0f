"""A valid transactional run (aborts, an unread info txn, marker gaps, a copier, a consumer group) and its mutations."""

from __future__ import annotations

from txn_events import commit, flatten, op, poll, send


def init(process, epoch, txn_id="a", pid=7):
    return op(process, "init", [], txn_id=txn_id, producer_id=pid, epoch=epoch)


def valid_run(*, reader_misses_v8=False, copier_duplicates=False, copier_skips_v7=False, group_misses_v8=False):
    """Every must-have-happened value is read; offsets leave gaps where commit markers stand."""
    reader_k1 = [poll(1, 0, 2)] + ([] if reader_misses_v8 else [poll(1, 2, 8)])
    group_k1 = [poll(1, 0, 2)] + ([] if group_misses_v8 else [poll(1, 2, 8)])
    second_copy = [] if copier_skips_v7 else [send(2, 107, 2, source=(0, 7))]
    extra_copy = (
        op(2, "txn", [send(2, 102, 4, source=(0, 1))], txn_id="copy", group="c", commit_time=1)
        if copier_duplicates
        else []
    )
    k2_reads = (
        [poll(2, 0, 101)]
        + ([] if copier_skips_v7 else [poll(2, 2, 107)])
        + ([poll(2, 4, 102)] if copier_duplicates else [])
    )
    return flatten(
        init(0, 0),
        op(0, "txn", [send(0, 1, 0), send(1, 2, 0)], txn_id="a", epoch=0, producer_id=7, commit_time=5),
        op(0, "txn", [send(0, 3), send(1, 4)], type="fail", txn_id="a", error="ABORTED"),
        op(0, "txn", [send(0, 5), send(1, 6)], type="info", txn_id="a", error="_MSG_TIMED_OUT"),
        init(4, 1),
        op(4, "txn", [send(0, 7, 2), send(1, 8, 2)], txn_id="a", epoch=1, producer_id=7, commit_time=5),
        op(1, "assign", [], keys=[0, 1, 2]),
        op(1, "poll", [poll(0, 0, 1), poll(0, 2, 7)] + reader_k1),
        op(
            2,
            "txn",
            [poll(0, 0, 1), send(2, 101, 0, source=(0, 1)), commit(0, 1)],
            txn_id="copy",
            group="c",
            commit_time=1,
        ),
        op(2, "txn", [poll(0, 2, 7)] + second_copy + [commit(0, 3)], txn_id="copy", group="c", commit_time=1),
        extra_copy,
        op(1, "poll", k2_reads),
        op(3, "poll", group_k1, group="g"),
        op(3, "commit", [commit(1, 3)], group="g"),
    )


def op_ids(events, **match):
    """Op ids (completion indices) of the completions whose fields equal ``match``."""
    return [i for i, e in enumerate(events) if e["type"] != "invoke" and all(e.get(k) == v for k, v in match.items())]


def op_with_value(events, value):
    """The op id of the completion that sends ``value``."""
    return next(
        i
        for i, e in enumerate(events)
        if e["type"] != "invoke" and any(m["f"] == "send" and m["value"] == value for m in e.get("mops", []))
    )
