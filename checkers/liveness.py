"""Stuck LSO: a read_committed consumer kept polling a key but saw a committed value only after the txn timeout.

"Throughout" is made concrete so it can be checked: take the write's
acknowledgement, or the reader's previous read of that key when it came
later (until then the reader was still getting older records of the key:
behind, not held back by the last stable offset), the completions of the
reading process's `ok` polls *of that key* in between, and the invoke of
the op that first read the value;
no gap between successive instants may exceed half of
`transaction.timeout.ms`. Measuring up to the reading op's invoke (not its
completion) keeps a slow poll that returned the value early from counting
as late.

An `ok` poll or txn op is a poll of key K when K was assigned to the
process when the op completed: an `assign` op sets the assignment to its
keys; a `subscribe` op empties it, and the group's `rebalance` entries
(recorded on the ops during which they happened, in order) add the keys it
assigned and remove those it revoked. A consumer revoked from K, or not
polling at all, is not polling K (a member whose rejoin waits on a paused
one can go seconds without either). So the gap rule spaces the polls of a
consumer that holds K, and never bridges a stretch in which it did not:
from the invoke of the op that dropped K (a revocation, a `subscribe`, an
`assign` without K) to the completion of the op that gave it back, K was
not the consumer's at some moment, and an interval that meets such a
stretch was not polled throughout however short the stretch (a group
rebalanced every few seconds can hold a member off K for most of the
interval in stretches each shorter than the gap bound).

The per-key pass finds the late first reads; only their processes' ops are
then replayed here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import passes
from checkers.anomaly import ANOMALY_SCHEMA, empty_anomalies
from checkers.arrays import NULL
from checkers.history_format import ASSIGN, OK, POLL, SUBSCRIBE, TXN
from checkers.keypass import LATE
from checkers.load import Tables
from checkers.routes import rows_of_routes
from checkers.table_format import OP_ROW, pid_route

MAX_GAP_FRACTION = 0.5
BEFORE_ANY_OP = -(1 << 62)  # where a process's first stretch without a key starts
STUCK_SCHEMA = T.StructType(
    [T.StructField(name, T.LongType()) for name in ("key", "value", "offset", "writer", "reader", "time")]
)


def find(t: Tables) -> DataFrame:
    rows = stuck_reads(t)
    return t.spark.createDataFrame(rows, ANOMALY_SCHEMA) if rows else empty_anomalies(t.spark)


def stuck_reads(t: Tables) -> list[tuple]:
    timeout = passes.main_params(t).timeout
    late = passes.small(t).get(LATE, [])
    if timeout is None or not late:
        return []
    max_gap = int(timeout * MAX_GAP_FRACTION)
    candidates = [(r["a"], r["key"], r["value"], r["offset"], r["b"], r["c"], r["d"], r["time"]) for r in late]
    pids = sorted({pid for pid, *_ in candidates})
    ops = (
        rows_of_routes(t.rows, [pid_route(pid) for pid in pids])
        .where(F.col("kind") == OP_ROW)
        .select(
            "pid",
            "invoke_index",
            "f",
            "type",
            F.coalesce("invoke_time", F.lit(NULL)).alias("invoke_time"),
            F.coalesce("complete_time", F.lit(NULL)).alias("complete_time"),
            "keys",
            "rebalance",
        )
    )
    found = ops.mapInArrow(_checker(candidates, max_gap), STUCK_SCHEMA).collect()
    return [
        ("stuck-lso", r["key"], r["value"], None, r["offset"], None, [r["writer"], r["reader"]], r["time"], None)
        for r in found
    ]


def _checker(candidates, max_gap):
    def run(batches):
        rows = [row for batch in batches for row in batch.to_pylist()]
        by_process: dict = {}
        for row in rows:
            by_process.setdefault(row["pid"], []).append(row)
        out = []
        for pid, ops in by_process.items():
            mine = [c for c in candidates if c[0] == pid]
            ordered = sorted(ops, key=lambda r: r["invoke_index"])
            keys = {c[1] for c in mine}
            instants, unheld = watch_keys(ordered, keys)
            for _, key, value, offset, reader, writer, since, invoke in mine:
                if held_throughout(unheld[key], since, invoke) and polled_throughout(
                    instants[key], since, invoke, max_gap
                ):
                    out.append(
                        {
                            "key": key,
                            "value": value,
                            "offset": offset,
                            "writer": writer,
                            "reader": reader,
                            "time": invoke,
                        }
                    )
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=pa.schema([(f.name, pa.int64()) for f in STUCK_SCHEMA]))

    return run


def watch_keys(ops: list[dict], keys: set) -> tuple[dict, dict]:
    """Replays the process's assignment (ops in process order). Per key: the
    sorted completion times of its `ok` polls of the key, and the (start,
    end) stretches in which the key may not have been assigned to it: from
    the invoke of the op that dropped the key to the completion of the op
    that assigned it again (NULL end: never again; before its first
    assignment a process holds no key)."""
    assigned: set = set()
    instants: dict = {key: [] for key in keys}
    stretches: dict = {key: [] for key in keys}
    dropped_at = {key: BEFORE_ANY_OP for key in keys}  # start of the open stretch; NULL: held

    def drop(named: set, at: int):
        for key in named & keys:
            if dropped_at[key] == NULL:
                dropped_at[key] = at

    def give(named: set, at: int):
        for key in named & keys:
            if dropped_at[key] != NULL:
                stretches[key].append((dropped_at[key], at))
                dropped_at[key] = NULL

    for op in ops:
        start, end = op["invoke_time"], op["complete_time"]
        if op["f"] == ASSIGN:
            named = set(op["keys"] or [])
            drop(assigned - named, start)
            give(named, end)
            assigned = named
        elif op["f"] == SUBSCRIBE:
            drop(assigned, start)
            assigned = set()
        for entry in op["rebalance"] or []:
            named = set((entry or {}).get("keys") or [])
            if (entry or {}).get("type") == "assigned":
                give(named, end)
                assigned |= named
            elif (entry or {}).get("type") == "revoked":
                drop(named, start)
                assigned -= named
        if op["type"] == OK and op["f"] in (POLL, TXN) and end != NULL:
            for key in assigned & keys:
                instants[key].append(end)
    for key, at in dropped_at.items():
        if at != NULL:
            stretches[key].append((at, NULL))
    for times in instants.values():
        times.sort()
    return instants, stretches


def held_throughout(stretches: list[tuple], since: int, invoke: int) -> bool:
    """No stretch without the key meets the open interval (since, invoke)."""
    return not any(start < invoke and (end == NULL or end > since) for start, end in stretches)


def polled_throughout(polls: list[int], since: int, invoke: int, max_gap: int) -> bool:
    """Polls strictly after `since` (the ack, or the reader's previous read of
    the key when later) and strictly before the invoke, with no gap over
    max_gap from `since` through them to the invoke."""
    first = bisect_right(polls, since)
    last = bisect_left(polls, invoke) - 1
    if first >= len(polls) or last < 0 or first > last:
        return False
    if polls[first] - since > max_gap or invoke - polls[last] > max_gap:
        return False
    return all(b - a <= max_gap for a, b in zip(polls[first:last], polls[first + 1 : last + 1]))
