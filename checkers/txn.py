"""Torn transactions and zombie writes (docs/ANOMALIES.md, "Transactions, sessions, groups").

The per-key pass names the few candidates (a transaction's unread write, a
fenced transaction's sends); what spans keys (the other writes of the same
transaction) is looked up for those candidates only.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import allowed, passes
from checkers.anomaly import ANOMALY_SCHEMA, empty_anomalies
from checkers.history_format import OK
from checkers.keypass import TORN, ZOMBIE_SEND
from checkers.load import Tables
from checkers.reads import read_by_ok
from checkers.table_format import SEND_ROW

NAMES = ("torn-transaction", "zombie-write")


def find(t: Tables) -> DataFrame:
    rows = torn_transactions(t) + zombie_writes(t)
    return t.spark.createDataFrame(rows, ANOMALY_SCHEMA) if rows else empty_anomalies(t.spark)


def torn_transactions(t: Tables) -> list[tuple]:
    """One row per unread write of a multi-key transaction that must have
    happened and of which another write was read.

    Only after a complete drain: before it, an unread write may simply not
    have been polled yet.
    """
    if not allowed.drain_complete(t.test):
        return []
    unread = passes.small(t).get(TORN, [])
    if not unread:
        return []
    read_values = _read_values(t, sorted({row["a"] for row in unread}))
    rows = []
    for row in unread:
        values = read_values.get(row["a"])
        if values:
            rows.append(
                (
                    "torn-transaction",
                    row["key"],
                    row["value"],
                    sorted(values),
                    row["offset"],
                    None,
                    [row["a"]],
                    row["time"],
                    None,
                )
            )
    return rows


def _read_values(t: Tables, ops: list[int]) -> dict:
    """op -> values of its sends that an `ok` op read (`ops`: sorted, not empty)."""
    sends = (F.col("kind") == SEND_ROW) & F.col("op").between(ops[0], ops[-1])
    found: dict = {}
    for row in read_by_ok(t.rows, sends, ops, t.metrics).collect():
        found.setdefault(row["op"], set()).add(row["value"])
    return found


def zombie_writes(t: Tables) -> list[tuple]:
    """Transactions of a fenced instance (older epoch) committed or read after
    the newer instance's init completed (passes.cross_key_facts finds them)."""
    passes.main_params(t)
    fenced = t.cache["prior"]["fenced"]
    if not fenced:
        return []
    sends: dict = {}
    for row in passes.small(t).get(ZOMBIE_SEND, []):
        sends.setdefault(row["a"], []).append((not row["c"], row["b"], row["key"], row["value"], row["offset"]))
    rows = []
    for zombie in sorted(fenced, key=lambda z: z["op"]):
        mine = sorted(sends.get(zombie["op"], []), key=_send_order)
        if not mine or not (zombie["type"] == OK or any(not unread for unread, *_ in mine)):
            continue
        _, _, key, value, offset = mine[0]
        rows.append(
            (
                "zombie-write",
                key,
                value,
                [s[3] for s in mine],
                offset,
                None,
                [zombie["op"], zombie["init_op"]],
                zombie["commit_time"],
                None,
            )
        )
    return rows


def _send_order(send):
    """Read sends first, then by position in the op (as sort_array of (unread, mop_index, ...))."""
    unread, mop_index, key, value, offset = send
    return (unread, mop_index, key, value, offset is not None, offset or 0)
