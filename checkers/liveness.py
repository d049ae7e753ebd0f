"""Stuck LSO: a read_committed consumer kept polling a key but saw a committed value only after the txn timeout.

"Throughout" is made concrete so it can be checked: take the write's
acknowledgement, the completions of the reading process's `ok` polls of the
key in between (ops of f poll or txn while its latest assign/subscribe named
the key), and the invoke of the op that first read the value; no gap between
successive instants may exceed half of `transaction.timeout.ms`. Measuring up
to the reading op's invoke (not its completion) keeps a slow poll that
returned the value early from counting as late.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform, empty_anomalies
from checkers.load import Tables

MAX_GAP_FRACTION = 0.5


def find(t: Tables) -> DataFrame:
    client = t.test.get("client") or {}
    timeout_ms = client.get("transaction.timeout.ms")
    if client.get("isolation.level") != "read_committed" or not isinstance(timeout_ms, (int, float)):
        return empty_anomalies(t.spark)
    timeout = int(timeout_ms * 1_000_000)
    max_gap = int(timeout * MAX_GAP_FRACTION)
    acks = (facts.must_writes(t).where(F.col("type") == "ok")
            .select("key", "value", F.col("op").alias("writer"), F.col("complete_time").alias("ack")))
    # Each process's first read of a value: a hash aggregate (no sort) over the
    # `ok` poll mops, which already carry their op's invoke time.
    first = F.min(F.struct("invoke_time", "op", "offset")).alias("first")
    reads = (t.mops.where((F.col("mf") == "poll") & (F.col("type") == "ok"))
             .groupBy("process", "key", "value").agg(first)
             .select("process", "key", "value", "first.*"))
    late = (reads.join(acks, ["key", "value"]).where(F.col("invoke_time") - F.col("ack") > timeout)
            .withColumn("rid", F.monotonically_increasing_id())).localCheckpoint(eager=True)
    # Late reads are rare: only their processes' polls of their keys are ranked.
    polls = _polls_of_assigned_keys(t).join(late.select("process", "key").distinct(), ["process", "key"], "left_semi")
    stuck = _polled_throughout(late, polls, max_gap)
    return conform(stuck, "stuck-lso", ops=F.array("writer", "op"), time=F.col("invoke_time"))


def _polled_throughout(late: DataFrame, polls: DataFrame, max_gap: int) -> DataFrame:
    """The late reads whose process polled the key with no gap over `max_gap`
    from the ack to the reading op's invoke.

    Linear, not a join of every late read with every poll: polls are ranked
    per (process, key) with a running count of big gaps; each late read looks
    up the first poll after its ack and the last one before its invoke in one
    sorted pass, and the big gaps between those two are a difference of counts.
    """
    by_time = Window.partitionBy("process", "key").orderBy("poll_done")
    ranked = (polls.withColumn("rank", F.row_number().over(by_time))
              .withColumn("gap", F.col("poll_done") - F.lag("poll_done").over(by_time))
              .withColumn("big", F.sum(F.when(F.col("gap") > max_gap, 1).otherwise(0))
                          .over(by_time.rowsBetween(Window.unboundedPreceding, 0))))
    poll_rows = ranked.select("process", "key", F.col("poll_done").alias("t"), F.lit(0).alias("tie"),
                              F.lit(None).cast("long").alias("rid"),
                              F.struct("rank", "poll_done", "big").alias("poll"))
    no_poll = F.lit(None).cast("struct<rank:int,poll_done:bigint,big:bigint>")
    # polls at the ack's instant do not count (strictly after); the invoke's likewise (strictly before)
    acks = late.select("process", "key", F.col("ack").alias("t"), F.lit(1).alias("tie"), "rid",
                       no_poll.alias("poll"))
    invokes = late.select("process", "key", F.col("invoke_time").alias("t"), F.lit(-1).alias("tie"), "rid",
                          no_poll.alias("poll"))
    # "The first poll from here on" is the last one so far in the mirrored order: a
    # growing frame Spark keeps incrementally (a frame to the end is redone per row).
    sort_keys = ("t", "tie", "poll.rank")
    order = Window.partitionBy("process", "key").orderBy(*sort_keys)
    mirrored = Window.partitionBy("process", "key").orderBy(*[F.col(k).desc_nulls_last() for k in sort_keys])
    timeline = poll_rows.unionByName(acks).unionByName(invokes)
    marked = (timeline.where(F.col("rid").isNotNull() | F.col("poll").isNotNull())
              .withColumn("after", F.last("poll", ignorenulls=True)
                          .over(mirrored.rowsBetween(Window.unboundedPreceding, 0)))
              .withColumn("before", F.last("poll", ignorenulls=True)
                          .over(order.rowsBetween(Window.unboundedPreceding, 0)))
              .where(F.col("rid").isNotNull()))
    after = marked.where(F.col("tie") == 1).select("rid", "after")
    before = marked.where(F.col("tie") == -1).select("rid", "before")
    bounds = after.join(before, "rid")
    return (late.join(bounds, "rid")
            .where(F.col("after").isNotNull() & F.col("before").isNotNull()
                   & (F.col("after.rank") <= F.col("before.rank"))
                   & (F.col("after.poll_done") - F.col("ack") <= max_gap)
                   & (F.col("invoke_time") - F.col("before.poll_done") <= max_gap)
                   & (F.col("before.big") == F.col("after.big"))))


def _polls_of_assigned_keys(t: Tables) -> DataFrame:
    """process, key, poll_done: completions of `ok` polls while the process's latest assign/subscribe named the key."""
    by_process = Window.partitionBy("process").orderBy("invoke_index").rowsBetween(Window.unboundedPreceding, -1)
    assignment = F.when(F.col("f").isin("assign", "subscribe"), F.coalesce("keys", F.array().cast("array<long>")))
    ops = (t.ops.where(F.col("process") != "nemesis")
           .withColumn("assigned", F.last(assignment, ignorenulls=True).over(by_process)))
    return (ops.where((F.col("type") == "ok") & F.col("f").isin("poll", "txn") & F.col("assigned").isNotNull()
                      & F.col("complete_time").isNotNull())
            .select("process", F.explode("assigned").alias("key"), F.col("complete_time").alias("poll_done")))
