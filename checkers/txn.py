"""Torn transactions and zombie writes (ANOMALIES.md, "Transactions, sessions, groups").

Both are joins over per-op facts, so they stay in Spark whatever the run's size.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform, empty_anomalies
from checkers.load import Tables


def find(t: Tables) -> DataFrame:
    return torn_transactions(t).unionByName(zombie_writes(t))


def torn_transactions(t: Tables) -> DataFrame:
    """One row per unread write of a multi-key transaction that must have happened and of which another write was read.

    Only after a complete drain: before it, an unread write may simply not
    have been polled yet.
    """
    if (t.test.get("drain") or {}).get("complete") is not True:
        return empty_anomalies(t.spark)
    per_txn = Window.partitionBy("op")
    writes = (facts.must_writes(t).where(F.col("f") == "txn")
              .withColumn("n_keys", F.size(F.collect_set("key").over(per_txn)))
              .withColumn("any_read", F.max(F.col("read").cast("int")).over(per_txn))
              .withColumn("read_values", F.collect_set(F.when(F.col("read"), F.col("value"))).over(per_txn)))
    torn = writes.where((F.col("n_keys") >= 2) & (F.col("any_read") == 1) & ~F.col("read"))
    offsets = facts.positions(t).select("key", "value", F.col("offset").alias("log_offset"))
    torn = torn.join(offsets, ["key", "value"], "left")
    return conform(torn, "torn-transaction",
                   offset=F.coalesce("offset", "log_offset"),
                   values=F.array_sort("read_values"),
                   ops=F.array(F.col("op")),
                   time=F.col("complete_time"))


def zombie_writes(t: Tables) -> DataFrame:
    """Transactions of a fenced instance (older epoch) committed or read after the newer instance's init completed.

    A transaction's instance is the epoch (and producer id) on its completion,
    else the process's last `ok` init before it.
    """
    ops = t.ops
    inits = ops.where((F.col("f") == "init") & (F.col("type") == "ok") & F.col("txn_id").isNotNull() &
                      F.col("epoch").isNotNull())
    txns = ops.where((F.col("f") == "txn") & F.col("txn_id").isNotNull() & F.col("commit_time").isNotNull())
    own = inits.select("process", F.col("invoke_index").alias("init_index"),
                       F.col("epoch").alias("own_epoch"), F.col("producer_id").alias("own_pid"))
    latest = Window.partitionBy("op").orderBy(F.desc("init_index"))
    attributed = (txns.join(own, (txns["process"] == own["process"]) & (own["init_index"] < txns["invoke_index"]), "left")
                  .drop(own["process"])
                  .withColumn("rank", F.row_number().over(latest)).where(F.col("rank") == 1)
                  .withColumn("txn_epoch", F.coalesce("epoch", "own_epoch"))
                  .withColumn("txn_pid", F.coalesce("producer_id", "own_pid"))
                  .where(F.col("txn_epoch").isNotNull())
                  .select("op", "txn_id", "type", "commit_time", "txn_epoch", "txn_pid"))
    newer = inits.select("txn_id", F.col("op").alias("init_op"), F.col("epoch").alias("new_epoch"),
                         F.col("producer_id").alias("new_pid"), F.col("complete_time").alias("init_done"))
    fenced = (attributed.join(newer, "txn_id")
              .where((F.col("new_epoch") > F.col("txn_epoch")) & (F.col("init_done") < F.col("commit_time")) &
                     (F.col("new_pid").isNull() | F.col("txn_pid").isNull() | (F.col("new_pid") == F.col("txn_pid"))))
              .withColumn("rank", F.row_number().over(Window.partitionBy("op").orderBy("init_done", "init_op")))
              .where(F.col("rank") == 1))
    sends = (facts.sends(t).select("op", "mop_index", "key", "value", "offset", "read")
             .groupBy("op").agg(F.sort_array(F.collect_list(F.struct(
                 (~F.col("read")).alias("unread"), "mop_index", "key", "value", "offset"))).alias("sends"),
                 F.max(F.col("read").cast("int")).alias("any_read")))
    zombies = (fenced.join(sends, "op")
               .where((F.col("type") == "ok") | (F.col("any_read") == 1)))
    shown = F.col("sends")[0]
    return conform(zombies, "zombie-write",
                   key=shown["key"], value=shown["value"], offset=shown["offset"],
                   values=F.transform("sends", lambda s: s["value"]),
                   ops=F.array(F.col("op"), F.col("init_op")),
                   time=F.col("commit_time"))
