"""results.json `partitions`: the log of each key an anomaly names, offset by offset.

Built in Spark, and only a bounded slice around the anomalies comes back to
the driver (MAX_OFFSETS per key), so the report can draw the partition.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import facts
from checkers.load import Tables

MAX_OFFSETS = 2000
MARGIN = 50

# Worst first: an offset shows the most serious status of its values.
STATUS_ORDER = ["inconsistent", "duplicate", "aborted", "lost", "unseen", "unacked", "acked-unread", "read"]


def partitions(t: Tables, anomalies: DataFrame, max_offsets: int = MAX_OFFSETS) -> dict:
    """Per key named by an anomaly: topic, partition, truncated, offsets[{offset, index, values, status}]."""
    named = (anomalies.where(F.col("key").isNotNull())
             .select("key", F.explode(F.array_compact(F.concat(
                 F.array(F.col("offset")), F.coalesce(F.col("offsets"), F.array().cast("array<long>"))))).alias("offset"))
             .unionByName(anomalies.where(F.col("key").isNotNull()).select("key", F.lit(None).cast("long").alias("offset"))))
    log = facts.log(t)
    spans = (named.join(log.select("key", "offset", "index").distinct(), ["key", "offset"], "left")
             .groupBy("key").agg(F.min("index").alias("lo"), F.max("index").alias("hi")))
    keys_named = [row["key"] for row in spans.select("key").distinct().collect()]
    if not keys_named:
        return {}
    statuses = _value_status(t, anomalies, keys_named)
    rows = (log.where(F.col("key").isin(keys_named))
            .join(statuses, ["key", "value"], "left")
            .groupBy("key", "offset", "index")
            .agg(F.array_sort(F.collect_set("value")).alias("values"),
                 F.min("rank").alias("rank"), F.max("dup").alias("dup"))
            .join(spans, ["key"]))
    # Centre on the anomalies; without a located one start at the key's beginning.
    lo = F.greatest(F.coalesce(F.col("lo"), F.lit(0)) - MARGIN, F.lit(0))
    window = Window.partitionBy("key").orderBy("index")
    chosen = (rows.where(F.col("index") >= lo)
              .withColumn("n", F.row_number().over(window))
              .where(F.col("n") <= max_offsets))
    totals = dict((r["key"], r["n"]) for r in log.where(F.col("key").isin(keys_named))
                  .select("key", "offset").distinct().groupBy("key").agg(F.count(F.lit(1)).alias("n")).collect())
    result: dict = {}
    for row in chosen.orderBy("key", "index").collect():
        key = row["key"]
        topic, partition = (t.test["keys"].get(str(key)) or [None, None])[:2]
        entry = result.setdefault(str(key), {"topic": topic, "partition": partition, "truncated": False, "offsets": []})
        if len(row["values"]) > 1:
            status = "inconsistent"
        elif row["dup"]:
            status = "duplicate"
        else:
            status = STATUS_ORDER[row["rank"]] if row["rank"] is not None else "unacked"
        entry["offsets"].append({"offset": row["offset"], "index": row["index"], "values": list(row["values"]),
                                 "status": status})
    for key, entry in result.items():
        entry["truncated"] = len(entry["offsets"]) < totals.get(int(key), 0)
    return result


def _value_status(t: Tables, anomalies: DataFrame, keys: list) -> DataFrame:
    """key, value, rank (index into STATUS_ORDER, without the offset-level ones), dup, for these keys only."""
    # Only the named keys are drawn: filtering first keeps every join below
    # to their share of the history, not all of it.
    named = F.col("key").isin(keys)

    def flagged(name):
        return (anomalies.where((F.col("name") == name) & named).select("key", "value").distinct()
                .withColumn(name, F.lit(True)))
    writers = (t.mops.where((F.col("mf") == "send") & named).groupBy("key", "value")
               .agg(F.max(F.when(F.col("type") == "fail", 1).otherwise(0)).alias("failed")))
    must = facts.must_writes(t).where(named).select("key", "value").distinct().withColumn("must", F.lit(True))
    read = facts.read_values(t).where(named).withColumn("is_read", F.lit(True))
    values = facts.log(t).where(named).select("key", "value").distinct()
    joined = values
    for frame in (writers, must, read, flagged("lost-write"), flagged("unseen"), flagged("duplicate")):
        joined = joined.join(frame, ["key", "value"], "left")
    rank = (F.when(F.col("failed") == 1, STATUS_ORDER.index("aborted"))
            .when(F.col("lost-write"), STATUS_ORDER.index("lost"))
            .when(F.col("unseen"), STATUS_ORDER.index("unseen"))
            .when(F.col("is_read") & F.col("must"), STATUS_ORDER.index("read"))
            .when(F.col("must"), STATUS_ORDER.index("acked-unread"))
            .otherwise(STATUS_ORDER.index("unacked")))
    return joined.select("key", "value", rank.alias("rank"), F.coalesce(F.col("duplicate"), F.lit(False)).alias("dup"))
