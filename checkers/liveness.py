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
    invokes = t.ops.select("op", "invoke_time")
    first_read = Window.partitionBy("process", "key", "value").orderBy("invoke_time", "op")
    reads = (facts.ok_reads(t).select("key", "value", "offset", "op", "process").join(invokes, "op")
             .withColumn("rank", F.row_number().over(first_read)).where(F.col("rank") == 1).drop("rank"))
    late = reads.join(acks, ["key", "value"]).where(F.col("invoke_time") - F.col("ack") > timeout)
    covering = _polls_of_assigned_keys(t)
    timeline = (late.join(covering, ["process", "key"], "left")
                .where(F.col("poll_done").isNull() |
                       ((F.col("poll_done") > F.col("ack")) & (F.col("poll_done") < F.col("invoke_time"))))
                .groupBy("key", "value", "offset", "op", "process", "writer", "ack", "invoke_time")
                .agg(F.collect_list("poll_done").alias("polls")))
    instants = F.array_sort(F.concat(F.array("ack"), "polls", F.array("invoke_time")))
    gaps = F.transform(F.sequence(F.lit(2), F.size(instants)),
                       lambda i: F.element_at(instants, i) - F.element_at(instants, i - 1))
    stuck = timeline.withColumn("max_gap", F.array_max(gaps)).where(F.col("max_gap") <= max_gap)
    return conform(stuck, "stuck-lso", ops=F.array("writer", "op"), time=F.col("invoke_time"))


def _polls_of_assigned_keys(t: Tables) -> DataFrame:
    """process, key, poll_done: completions of `ok` polls while the process's latest assign/subscribe named the key."""
    by_process = Window.partitionBy("process").orderBy("invoke_index").rowsBetween(Window.unboundedPreceding, -1)
    assignment = F.when(F.col("f").isin("assign", "subscribe"), F.coalesce("keys", F.array().cast("array<long>")))
    ops = (t.ops.where(F.col("process") != "nemesis")
           .withColumn("assigned", F.last(assignment, ignorenulls=True).over(by_process)))
    return (ops.where((F.col("type") == "ok") & F.col("f").isin("poll", "txn") & F.col("assigned").isNotNull()
                      & F.col("complete_time").isNotNull())
            .select("process", F.explode("assigned").alias("key"), F.col("complete_time").alias("poll_done")))
