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
one can go seconds without either).

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
from checkers.table_format import OP_ROW, pid_route

MAX_GAP_FRACTION = 0.5
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
    ops = t.rows.where((F.col("kind") == OP_ROW) & F.col("route").isin([pid_route(pid) for pid in pids])).select(
        "pid",
        "invoke_index",
        "f",
        "type",
        F.coalesce("complete_time", F.lit(NULL)).alias("complete_time"),
        "keys",
        "rebalance",
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
            instants = polls_of_keys(sorted(ops, key=lambda r: r["invoke_index"]), {c[1] for c in mine})
            for _, key, value, offset, reader, writer, since, invoke in mine:
                if polled_throughout(instants.get(key, []), since, invoke, max_gap):
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


def polls_of_keys(ops: list[dict], keys: set) -> dict:
    """key -> sorted completion times of the process's `ok` polls of that key (ops in process order)."""
    assigned: set = set()
    instants: dict = {key: [] for key in keys}
    for op in ops:
        if op["f"] == ASSIGN:
            assigned = set(op["keys"] or [])
        elif op["f"] == SUBSCRIBE:
            assigned = set()
        for entry in op["rebalance"] or []:
            named = set((entry or {}).get("keys") or [])
            if (entry or {}).get("type") == "assigned":
                assigned |= named
            elif (entry or {}).get("type") == "revoked":
                assigned -= named
        if op["type"] == OK and op["f"] in (POLL, TXN) and op["complete_time"] != NULL:
            for key in assigned & keys:
                instants[key].append(op["complete_time"])
    for times in instants.values():
        times.sort()
    return instants


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
