"""The `stats` section of results.json (docs/RESULTS.md): counts, latency
quantiles per op and outcome, throughput over time and consumers' lag.

Why in Spark: the history can be far larger than the driver's memory, so only
aggregates (a few hundred rows per series) come back to the driver.
Quantiles are approximate (percentile_approx), accurate to ~0.1% of rank.
"""

from __future__ import annotations

import math

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import facts
from checkers.load import Tables

MAX_BUCKETS = 600
MAX_LAG_ROWS = 20000
NICE_STEPS = (1, 2, 5)
ACCURACY = 1000
QUANTILES = [0.5, 0.9, 0.99]


def bucket_seconds(duration_s: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The smallest 1-2-5 step (>= 0.1 s) giving at most `max_buckets` buckets."""
    if duration_s <= 0:
        return 1.0
    target = duration_s / max_buckets
    if target <= 0.1:
        return 0.1
    exponent = math.floor(math.log10(target))
    for exp in (exponent, exponent + 1):
        for step in NICE_STEPS:
            size = step * 10.0 ** exp
            if size >= target:
                return round(size, 6)
    return round(10.0 ** (exponent + 1), 6)


def _ms(value) -> float | None:
    return None if value is None else round(value / 1e6, 3)


def _quantile_columns(latency: F.Column) -> list[F.Column]:
    return [F.count(F.lit(1)).alias("count"),
            F.percentile_approx(latency, QUANTILES, ACCURACY).alias("q"),
            F.max(latency).alias("max")]


def _client_ops(t: Tables) -> DataFrame:
    return t.ops.where(F.col("process") != "nemesis")


def compute_stats(t: Tables) -> dict:
    """Returns results.json `stats` for the loaded run."""
    ops = _client_ops(t)
    totals = ops.agg(
        F.count(F.lit(1)).alias("ops"),
        F.sum((F.col("type") == "ok").cast("long")).alias("ok"),
        F.sum((F.col("type") == "info").cast("long")).alias("info"),
        F.sum((F.col("type") == "fail").cast("long")).alias("fail"),
    ).first()
    span = t.events.agg(F.count(F.lit(1)).alias("events"),
                        F.max("time").alias("last"), F.min("time").alias("first")).first()
    duration_s = max(0.0, ((span["last"] or 0) - min(0, span["first"] or 0)) / 1e9)
    stats = {"ops": int(totals["ops"]), "ok": int(totals["ok"] or 0),
             "info": int(totals["info"] or 0), "fail": int(totals["fail"] or 0),
             "events": int(span["events"]), "duration_s": round(duration_s, 3)}

    by_f: dict[str, dict[str, int]] = {}
    for row in ops.groupBy("f", "type").count().collect():
        by_f.setdefault(row["f"], {"ok": 0, "fail": 0, "info": 0})[row["type"]] = int(row["count"])
    stats["by_f"] = dict(sorted(by_f.items()))

    done = ops.where(F.col("complete_time").isNotNull()).withColumn(
        "latency", F.col("complete_time") - F.col("invoke_time"))
    stats["latency"] = [
        {"f": r["f"], "type": r["type"], "count": int(r["count"]),
         "p50_ms": _ms(r["q"][0]), "p90_ms": _ms(r["q"][1]), "p99_ms": _ms(r["q"][2]),
         "max_ms": _ms(r["max"])}
        for r in done.groupBy("f", "type").agg(*_quantile_columns(F.col("latency")))
        .orderBy("f", "type").collect()]

    bucket_s = bucket_seconds(duration_s)
    bucket_ns = int(round(bucket_s * 1e9))
    stats["timeseries"] = {"bucket_s": bucket_s, "rows": _timeseries(done, bucket_ns, bucket_s)}
    # One lag row per bucket and key: coarser buckets when there are many keys.
    lag_s = max(bucket_s, bucket_seconds(duration_s, max(1, MAX_LAG_ROWS // max(1, len(t.test["keys"])))))
    stats["lag"] = {"bucket_s": lag_s, "rows": _lag(t, int(round(lag_s * 1e9)), lag_s)}
    return stats


def _bucket(column: str, bucket_ns: int) -> F.Column:
    return F.floor(F.col(column) / F.lit(bucket_ns)).cast("long").alias("bucket")


def _timeseries(done: DataFrame, bucket_ns: int, bucket_s: float) -> list[dict]:
    """Per completion-time bucket, op f and outcome: throughput and latency."""
    rows = (done.groupBy(_bucket("complete_time", bucket_ns), "f", "type")
            .agg(*_quantile_columns(F.col("latency")))
            .orderBy("bucket", "f", "type").collect())
    return [{"t": round(r["bucket"] * bucket_s, 6), "f": r["f"], "type": r["type"],
             "count": int(r["count"]), "p50_ms": _ms(r["q"][0]), "p99_ms": _ms(r["q"][2]),
             "max_ms": _ms(r["max"])} for r in rows]


def _lag(t: Tables, bucket_ns: int, bucket_s: float) -> list[dict]:
    """Per read-completion bucket and key, the worst time from a value's
    acknowledged send to an `ok` poll returning it (never negative: a read
    may complete before its writer hears the ack)."""
    acked = (facts.must_writes(t).where(F.col("type") == "ok")
             .groupBy("key", "value").agg(F.min("complete_time").alias("acked_at")))
    reads = facts.ok_reads(t).select("key", "value", "complete_time")
    lag = (reads.join(acked, ["key", "value"])
           .withColumn("lag", F.greatest(F.col("complete_time") - F.col("acked_at"), F.lit(0))))
    rows = (lag.groupBy(_bucket("complete_time", bucket_ns), "key")
            .agg(F.max("lag").alias("lag")).orderBy("bucket", "key").collect())
    return [{"t": round(r["bucket"] * bucket_s, 6), "key": int(r["key"]),
             "lag_ms": _ms(r["lag"])} for r in rows]
