"""Facts that several finders share (ANOMALIES.md ground rules), built once per run.

Each is a cached DataFrame kept in ``t.cache`` so that the log, for one,
is computed a single time however many finders ask for it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.load import Tables


def _cached(t: Tables, name: str, build) -> DataFrame:
    if name not in t.cache:
        # A local checkpoint, not persist: it cuts the lineage, so the plans
        # of finders built on several facts stay small and quick to plan.
        t.cache[name] = build().localCheckpoint(eager=True)
    return t.cache[name]


def ok_reads(t: Tables) -> DataFrame:
    """Records returned by polls of `ok` ops: the only reads that count as reads."""
    return _cached(t, "ok_reads", lambda: t.mops.where((F.col("mf") == "poll") & (F.col("type") == "ok")).select(
        "key", "value", "offset", "op", "mop_index", "process", "group", "complete_time", "poll", "f", "txn_id"))


def read_values(t: Tables) -> DataFrame:
    """Distinct (key, value) read by some `ok` op."""
    return _cached(t, "read_values", lambda: ok_reads(t).select("key", "value").distinct())


def sends(t: Tables) -> DataFrame:
    """Every send mop, with `read` = some `ok` op read its value."""
    def build():
        flagged = read_values(t).withColumn("read", F.lit(True))
        return (t.mops.where(F.col("mf") == "send")
                .join(flagged, ["key", "value"], "left")
                .withColumn("read", F.coalesce(F.col("read"), F.lit(False))))
    return _cached(t, "sends", build)


def must_writes(t: Tables) -> DataFrame:
    """Sends that must have happened.

    An `ok` send; an `info` send some `ok` op read; every send of an `info`
    txn of which one send was read (a transaction is atomic). A plain `info`
    op with several sends is judged send by send.
    """
    def build():
        s = sends(t)
        info = F.col("type") == "info"
        # Few info txns have a read send: a small set joined back, no sort of all sends.
        read_txns = (s.where(info & (F.col("f") == "txn") & F.col("read"))
                     .select("op").distinct().withColumn("txn_read", F.lit(True)))
        must = ((F.col("type") == "ok") | (info & F.col("read"))
                | (info & (F.col("f") == "txn") & F.coalesce(F.col("txn_read"), F.lit(False))))
        return s.join(read_txns, ["op"], "left").where(must).select(
            "key", "value", "offset", "op", "mop_index", "process", "f", "type", "txn_id", "epoch",
            "commit_time", "complete_time", "invoke_time", "read", "from_key", "from_value", "group")
    return _cached(t, "must_writes", build)


def log(t: Tables) -> DataFrame:
    """key, offset, index, value: every polled record plus every known-offset must-have-happened send.

    `index` is the dense rank of the offset within its key, so gaps left by
    transaction markers and aborted records never count.
    """
    def build():
        polled = t.mops.where(F.col("mf") == "poll").select("key", "offset", "value")
        sent = must_writes(t).where(F.col("offset").isNotNull()).select("key", "offset", "value")
        records = polled.unionByName(sent).distinct()
        return records.withColumn("index", F.dense_rank().over(Window.partitionBy("key").orderBy("offset")) - 1) \
            .select("key", "offset", "index", "value")
    return _cached(t, "log", build)


def positions(t: Tables) -> DataFrame:
    """key, value, position (first index of the value), offset (its first offset)."""
    return _cached(t, "positions", lambda: log(t).groupBy("key", "value").agg(
        F.min("index").alias("position"), F.min("offset").alias("offset")))


def read_bound(t: Tables) -> DataFrame:
    """key, bound: the highest index at which any `ok` op read on the key."""
    def build():
        return (ok_reads(t).select("key", "offset").distinct()
                .join(log(t).select("key", "offset", "index").distinct(), ["key", "offset"])
                .groupBy("key").agg(F.max("index").alias("bound")))
    return _cached(t, "read_bound", build)
