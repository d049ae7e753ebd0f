"""Order anomalies of consumers and producers (ANOMALIES.md, the poll/send family).

A read sits at the log index of the offset it was read at; a send at the
index of the offset the broker gave it. Successive reads (sends) of one
process and key are compared with a window; resets (assign/subscribe ops,
rebalance entries) cut the sequence into segments that are never compared
across.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform, union_all
from checkers.load import Tables, known_keys

NAMES = ("poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll",
         "nonmonotonic-send", "int-send-skip", "int-nonmonotonic-send")

# Sort slots inside one op: a rebalance resets before and after the op's reads.
BEFORE, AFTER = -1, 1 << 30


def _indexed(df: DataFrame, t: Tables) -> DataFrame:
    """Adds `index`, the log index of each row's (key, offset)."""
    return df.join(facts.log(t).select("key", "offset", "index").distinct(), ["key", "offset"])


def _resets(t: Tables, include_rebalance: bool) -> DataFrame:
    """process, key, op, slot of every reset marker (one per key for assign/subscribe)."""
    keys = t.spark.createDataFrame([(k,) for k in known_keys(t.test)], "key long")
    whole = (t.ops.where(F.col("f").isin("assign", "subscribe"))
             .select("process", "op").crossJoin(keys)
             .select("process", "key", "op", F.lit(0).alias("slot")))
    if not include_rebalance:
        return whole
    named = (t.ops.where(F.col("rebalance").isNotNull())
             .select("process", "op", F.explode("rebalance").alias("r"))
             .select("process", "op", F.explode("r.keys").alias("key")).distinct())
    around = named.select("process", "key", "op", F.explode(F.array(F.lit(BEFORE), F.lit(AFTER))).alias("slot"))
    return whole.unionByName(around)


def _successive(events: DataFrame, resets: DataFrame) -> DataFrame:
    """Pairs each event with the previous one of its process and key in the same reset segment."""
    marked = (events.withColumn("reset", F.lit(0))
              .unionByName(resets.withColumn("reset", F.lit(1)), allowMissingColumns=True))
    order = Window.partitionBy("process", "key").orderBy("op", "slot", "reset")
    segmented = marked.withColumn("segment", F.sum("reset").over(order.rowsBetween(Window.unboundedPreceding, 0)))
    rows = segmented.where(F.col("reset") == 0)
    # Same partitioning and a prefix of the same order as above, so Spark
    # neither shuffles nor sorts again; the previous row counts only when it
    # lies in the same segment (segments only grow along the order).
    w = Window.partitionBy("process", "key").orderBy("op", "slot")
    for name in ("op", "index", "value", "offset", "segment"):
        rows = rows.withColumn(f"prev_{name}", F.lag(name).over(w))
    return rows.where(F.col("prev_op").isNotNull() & (F.col("prev_segment") == F.col("segment")))


def _conform(rows: DataFrame, name: str) -> DataFrame:
    return conform(rows, name,
                   values=F.array(F.col("prev_value"), F.col("value")),
                   offsets=F.array(F.col("prev_offset"), F.col("offset")),
                   ops=F.array_distinct(F.array(F.col("prev_op"), F.col("op"))))


def poll_anomalies(t: Tables) -> DataFrame:
    reads = _indexed(facts.ok_reads(t), t).select(
        "process", "key", "op", F.col("mop_index").alias("slot"), "index", "value", "offset",
        F.col("complete_time").alias("time"))
    pairs = _successive(reads, _resets(t, include_rebalance=True))
    rebalanced = (t.ops.where(F.col("rebalance").isNotNull())
                  .select("op", F.explode("rebalance").alias("r"))
                  .select("op", F.explode("r.keys").alias("key"))
                  .distinct().withColumn("exempt", F.lit(True)))
    pairs = pairs.join(rebalanced, ["op", "key"], "left")
    across = pairs.where(F.col("op") != F.col("prev_op"))
    inside = pairs.where((F.col("op") == F.col("prev_op")) & F.col("exempt").isNull())
    skip = F.col("index") > F.col("prev_index") + 1
    back = F.col("index") <= F.col("prev_index")
    return union_all(t.spark, [
        _conform(across.where(skip), "poll-skip"),
        _conform(across.where(back), "nonmonotonic-poll"),
        _conform(inside.where(skip), "int-poll-skip"),
        _conform(inside.where(back), "int-nonmonotonic-poll"),
    ])


def send_anomalies(t: Tables) -> DataFrame:
    known = facts.must_writes(t).where(F.col("offset").isNotNull())
    sends = _indexed(known, t).select(
        "process", "key", "op", F.col("mop_index").alias("slot"), "index", "value", "offset", "type",
        F.col("complete_time").alias("time"))
    resets = _resets(t, include_rebalance=False)
    across = _successive(sends.where(F.col("type") == "ok"), resets).where(F.col("op") != F.col("prev_op"))
    inside = _successive(sends, resets).where(F.col("op") == F.col("prev_op"))
    return union_all(t.spark, [
        _conform(across.where(F.col("index") <= F.col("prev_index")), "nonmonotonic-send"),
        _conform(inside.where(F.col("index") > F.col("prev_index") + 1), "int-send-skip"),
        _conform(inside.where(F.col("index") <= F.col("prev_index")), "int-nonmonotonic-send"),
    ])


def find(t: Tables) -> DataFrame:
    return union_all(t.spark, [poll_anomalies(t), send_anomalies(t)])
