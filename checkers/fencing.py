"""Which transactions a newer instance of their transactional.id fenced
(the zombie-write candidates of docs/ANOMALIES.md).

A transaction's instance is the epoch (and producer id) on its completion,
else the process's last `ok` init before it. An `ok` init counts against a
transaction when its id is the same, its epoch higher and its producer id
the same (or either unknown). The transaction is fenced when the earliest
such init (by completion, then op) completed before the transaction's
commit: the earliest one before the commit is then that one.

Inits are few next to transactions: one per instance a producer starts
(138,433 against 2.9M transactions at 10M events of the txn shape of
issue 42). When the load counted few enough, they come to the driver as
arrays (`NewerInits`), and every task looks its transactions up in them:
one scan of the op rows, no shuffle. The windows in Spark that did it
(`by_windows`, still used for more inits than the driver may hold) took about 11 s there,
with the narrow table they read (docs/CHECKERS.md).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from checkers.arrays import group_ids
from checkers.fetch import fetch_rows
from checkers.history_format import INIT, OK, TXN
from checkers.spark import may_broadcast

FENCED_SCHEMA = "op long, type string, commit_time long, init_op long"
_FENCED_ARROW = pa.schema(
    [("op", pa.int64()), ("type", pa.string()), ("commit_time", pa.int64()), ("init_op", pa.int64())]
)


def fenced(ops: DataFrame, ok_inits: int) -> list[dict]:
    """The fenced transactions of `ops` (op rows of the loaded table, or any
    frame with its op columns), one dict each: op, type, commit_time and
    init_op, the earliest newer init. `ok_inits`: how many `ok` inits the
    load counted, the estimate that lets them come to the driver (as a
    broadcast table may: checkers/spark.py)."""
    if may_broadcast(ops.sparkSession, ok_inits):
        return by_lookup(ops)
    return [row.asDict() for row in by_windows(ops).collect()]


def _inits(ops: DataFrame) -> DataFrame:
    return ops.where(
        (F.col("f") == INIT)
        & (F.col("type") == OK)
        & F.col("txn_id").isNotNull()
        & F.col("epoch").isNotNull()
        & F.col("complete_time").isNotNull()
    ).select(
        "txn_id",
        F.col("producer_id").alias("pid"),
        F.col("epoch"),
        F.col("complete_time").alias("init_done"),
        F.col("op").alias("init_op"),
    )


def _txns(ops: DataFrame) -> DataFrame:
    return (
        ops.where((F.col("f") == TXN) & F.col("txn_id").isNotNull() & F.col("commit_time").isNotNull())
        .withColumn("epoch", F.coalesce("epoch", "own_epoch"))
        .withColumn("pid", F.coalesce("producer_id", "own_producer_id"))
        .where(F.col("epoch").isNotNull())
        .select("op", "txn_id", "type", "commit_time", "epoch", "pid")
    )


def by_lookup(ops: DataFrame) -> list[dict]:
    """`fenced` with the inits in the driver, broadcast to the tasks."""
    inits = _inits(ops).toArrow()
    if inits.num_rows == 0:
        return []
    spark = ops.sparkSession
    shared = spark.sparkContext.broadcast(NewerInits.of(inits))
    try:
        return fetch_rows(_txns(ops).mapInArrow(_looked_up(shared), FENCED_SCHEMA))
    finally:
        shared.destroy()


def _looked_up(shared):
    def run(batches):
        lookup = shared.value
        for batch in batches:
            if batch.num_rows:
                found = lookup.fenced(batch)
                if found.num_rows:
                    yield found

    return run


class NewerInits:
    """The `ok` inits of a run as arrays, asked per transaction for the
    earliest init of its id with a higher epoch and a producer id that
    fits. Inits are ranked by (completion, op); per group, in order of
    epoch, the lowest rank at or after each place (`_FirstAbove`)."""

    def __init__(self, ids: pa.Array, code, pid, pid_known, epoch, done, op):
        order = np.lexsort((op, done))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        self.ids = ids  # the transactional.ids, sorted
        self.done, self.op = done[order], op[order]  # by rank
        zero = np.zeros(len(code), dtype=np.int64)
        self.same_pid = _FirstAbove(code[pid_known], pid[pid_known], epoch[pid_known], rank[pid_known])
        self.no_pid = _FirstAbove(code[~pid_known], zero[~pid_known], epoch[~pid_known], rank[~pid_known])
        self.any_pid = _FirstAbove(code, zero, epoch, rank)

    @classmethod
    def of(cls, inits: pa.Table) -> NewerInits:
        """From a table of (txn_id, pid, epoch, init_done, init_op) with no
        null but pid."""
        unique = pc.unique(inits.column("txn_id"))
        ids = unique.take(pc.array_sort_indices(unique))
        code = _codes(inits.column("txn_id"), ids)
        pid, pid_known = _with_nulls(inits.column("pid"))
        return cls(ids, code, pid, pid_known, *(_longs(inits.column(n)) for n in ("epoch", "init_done", "init_op")))

    def first(self, code: np.ndarray, pid: np.ndarray, pid_known: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """Per asked transaction: the rank of its earliest newer init, -1 if none
        (`code`: its id's index in `ids`, -1 for an id no init has)."""
        found = np.full(len(code), -1, dtype=np.int64)
        has = code >= 0
        zero = np.zeros(len(code), dtype=np.int64)
        known, unknown = has & pid_known, has & ~pid_known
        same = self.same_pid.first(code[known], pid[known], epoch[known])
        none = self.no_pid.first(code[known], zero[known], epoch[known])
        never = np.iinfo(np.int64).max
        best = np.minimum(np.where(same < 0, never, same), np.where(none < 0, never, none))
        found[known] = np.where(best == never, -1, best)
        found[unknown] = self.any_pid.first(code[unknown], zero[unknown], epoch[unknown])
        return found

    def fenced(self, txns: pa.RecordBatch) -> pa.RecordBatch:
        """The fenced ones of a batch of (op, txn_id, type, commit_time, epoch, pid), as FENCED_SCHEMA."""
        code, epoch = _codes(txns.column("txn_id"), self.ids), _longs(txns.column("epoch"))
        pid, pid_known = _with_nulls(txns.column("pid"))
        # An instance commits many transactions: each distinct (id, producer
        # id, epoch) is asked once (a search on the structured keys costs
        # about 4 us a row).
        asked, n = group_ids(code, pid, pid_known.view(np.int8), epoch)
        one = np.empty(n, dtype=np.int64)
        one[asked] = np.arange(len(asked))
        rank = self.first(code[one], pid[one], pid_known[one], epoch[one])[asked]
        commit = _longs(txns.column("commit_time"))
        hit = np.flatnonzero((rank >= 0) & (self.done[np.maximum(rank, 0)] < commit))
        return pa.RecordBatch.from_arrays(
            [
                pa.array(_longs(txns.column("op"))[hit]),
                txns.column("type").take(pa.array(hit)),
                pa.array(commit[hit]),
                pa.array(self.op[rank[hit]]),
            ],
            schema=_FENCED_ARROW,
        )


class _FirstAbove:
    """Per group (id, producer id), the lowest rank among the entries of an
    epoch above an asked one. Entries sorted by (id, producer id, epoch):
    the first above the asked epoch is found by a binary search, and the
    lowest rank from there to the group's end is kept for every place (a
    minimum taken from the end, each group's ranks lifted above the groups
    before it so that none leaks into them)."""

    KEY = np.dtype([("code", np.int64), ("pid", np.int64), ("epoch", np.int64)])

    def __init__(self, code: np.ndarray, pid: np.ndarray, epoch: np.ndarray, rank: np.ndarray):
        keys = _keys(code, pid, epoch)
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        code, pid = self.keys["code"], self.keys["pid"]
        new_group = np.r_[True, (code[1:] != code[:-1]) | (pid[1:] != pid[:-1])][: len(order)]
        lift = (np.cumsum(new_group) - 1) * (int(rank.max()) + 1 if len(rank) else 1)
        lowest = np.minimum.accumulate((rank[order] + lift)[::-1])[::-1]
        self.best = lowest - lift

    def first(self, code: np.ndarray, pid: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        found = np.full(len(code), -1, dtype=np.int64)
        if not len(self.keys) or not len(code):
            return found
        at = np.searchsorted(self.keys, _keys(code, pid, epoch), side="right")
        inside = at < len(self.keys)
        hit = np.flatnonzero(inside)
        there = self.keys[at[hit]]
        hit = hit[(there["code"] == code[hit]) & (there["pid"] == pid[hit])]
        found[hit] = self.best[at[hit]]
        return found


def _keys(code: np.ndarray, pid: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    keys = np.empty(len(code), dtype=_FirstAbove.KEY)
    keys["code"], keys["pid"], keys["epoch"] = code, pid, epoch
    return keys


def _codes(ids, known: pa.Array) -> np.ndarray:
    """Each id's index in `known` (sorted), -1 where it is not there."""
    found = pc.index_in(ids, value_set=known)
    return _longs(pc.fill_null(found, -1))


def _with_nulls(column) -> tuple[np.ndarray, np.ndarray]:
    """A nullable long column as values (0 where null) and where it is known."""
    known = pc.is_valid(column).to_numpy(zero_copy_only=False)
    return _longs(pc.fill_null(column, 0)), np.asarray(known, dtype=bool)


def _longs(column) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def by_windows(ops: DataFrame) -> DataFrame:
    """`fenced` in Spark, for runs with too many inits for the driver.

    The answer depends only on the transaction's (transactional.id, producer
    id, epoch), asked once per distinct triple, as of the inits
    (`_first_newer`), then joined back to the transactions on that triple:
    sorts and windows whose work grows with the rows, where pairing each
    transaction with every init of its id grew with their product (issue
    42: 25 billion pairs at 10M events of a history that re-initialises
    after each `info` transaction)."""
    inits, txns = _inits(ops), _txns(ops)
    asked = txns.select("txn_id", "pid", "epoch").distinct()
    known_pid = F.col("pid").isNotNull()
    answers = (
        # an init of the same producer id
        _first_newer(asked.where(known_pid), inits.where(known_pid), ["txn_id", "pid"])
        # an init of no known producer id, for a transaction of a known one
        .unionByName(_first_newer(asked.where(known_pid), inits.where(~known_pid).drop("pid"), ["txn_id"]))
        # any init, for a transaction of no known producer id
        .unionByName(_first_newer(asked.where(~known_pid), inits.drop("pid"), ["txn_id"]))
        .groupBy("txn_id", "pid", "epoch")
        .agg(F.min(F.struct("init_done", "init_op")).alias("first"))
        .select(*[F.col(c).alias("asked_" + c) for c in ("txn_id", "pid", "epoch")], "first")
    )
    same: Column = (
        (F.col("txn_id") == F.col("asked_txn_id"))
        & F.col("pid").eqNullSafe(F.col("asked_pid"))
        & (F.col("epoch") == F.col("asked_epoch"))
    )
    return (
        txns.join(answers, same)
        .where(F.col("first.init_done") < F.col("commit_time"))
        .select("op", "type", "commit_time", F.col("first.init_op").alias("init_op"))
    )


def _first_newer(asked: DataFrame, inits: DataFrame, by: list[str]) -> DataFrame:
    """Per asked (txn_id, pid, epoch): the first of `inits` (by completion,
    then op) with the same `by` columns and a higher epoch, as
    (txn_id, pid, epoch, init_done, init_op); none where no init is higher.

    That first init is a record: its epoch is above every epoch before it.
    Records climb in epoch as they go on in time, so the first init above
    an epoch is the record of the lowest epoch above it: ordered by epoch
    from the top, the last record seen before the asked row (records of an
    equal epoch sort after it, so they do not count)."""
    in_time = Window.partitionBy(*by).orderBy("init_done", "init_op").rowsBetween(Window.unboundedPreceding, -1)
    records = (
        inits.withColumn("before", F.max("epoch").over(in_time))
        .where(F.col("before").isNull() | (F.col("epoch") > F.col("before")))
        .select(*by, "epoch", F.struct("init_done", "init_op").alias("record"))
    )
    rows = asked.select("txn_id", "pid", "epoch", F.lit(0).alias("is_record")).unionByName(
        records.withColumn("is_record", F.lit(1)), allowMissingColumns=True
    )
    from_top = (
        Window.partitionBy(*by)
        .orderBy(F.col("epoch").desc(), "is_record")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    found = rows.withColumn("found", F.last("record", ignorenulls=True).over(from_top))
    return found.where((F.col("is_record") == 0) & F.col("found").isNotNull()).select(
        "txn_id", "pid", "epoch", F.col("found.init_done").alias("init_done"), F.col("found.init_op").alias("init_op")
    )
