"""The `stats` section of results.json (docs/RESULTS.md): counts, latency
quantiles per op and outcome, throughput over time and consumers' lag.

Counts and the run's span come from the load's own metrics; latency and
throughput are one grouping-sets aggregation over the op rows, read from
the partitions that hold them (the load's metrics name them); lag comes
from the per-key pass. Only aggregates (a few hundred rows per series)
reach the driver. Quantiles are approximate (percentile_approx), accurate
to ~0.1% of rank.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from checkers import passes
from checkers.buckets import bucket_seconds, lag_bucket_seconds
from checkers.history_format import NEMESIS
from checkers.keypass import LAG
from checkers.load import Tables
from checkers.routes import rows_in_partitions
from checkers.spark import session_conf
from checkers.table_format import OP_ROW

ACCURACY = 1000
QUANTILES = [0.5, 0.9, 0.99]
# Spark aggregates percentile_approx by hash only up to 128 groups per task,
# then sorts every remaining row by its group. The time series has up to
# MAX_BUCKETS buckets per (f, type), so every large history sorted: the
# stats job of a 10M check took 5.6 s that way and 4.5 s by hash, warm
# (1M: 0.91 against 0.77 s), with the same results. A group's buffer holds
# at most its own rows' latencies until it compresses them, so the hash
# map holds at most the task's rows.
HASH_GROUPS_CONF = ("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "1000000")


def _ms(value) -> float | None:
    return None if value is None else round(value / 1e6, 3)


def compute_stats(t: Tables) -> dict:
    """Returns results.json `stats` for the loaded run."""
    m = t.metrics
    duration_s = passes.duration_s(t)
    stats = {
        "ops": m["ops"],
        "ok": m["ok"],
        "info": m["info"],
        "fail": m["fail"],
        "events": m["events"],
        "duration_s": round(duration_s, 3),
    }
    bucket_s = bucket_seconds(duration_s)
    bucket_ns = int(round(bucket_s * 1e9))
    # Only the partitions that hold client op rows are read (the load found them).
    ops = rows_in_partitions(t.rows, t.metrics["op_partitions"])
    ops = ops.where((F.col("kind") == OP_ROW) & (F.col("process") != NEMESIS))
    latency = (F.col("complete_time") - F.col("invoke_time")).alias("latency")
    bucket = F.floor(F.col("complete_time") / F.lit(bucket_ns)).cast("long").alias("bucket")
    with session_conf(t.spark, *HASH_GROUPS_CONF):
        grouped = (
            ops.select("f", "type", latency, bucket)
            .groupingSets([["f", "type"], ["bucket", "f", "type"]], "bucket", "f", "type")
            .agg(
                F.count(F.lit(1)).alias("all"),
                F.count("latency").alias("count"),
                F.percentile_approx("latency", QUANTILES, ACCURACY).alias("q"),
                F.max("latency").alias("max"),
                F.grouping("bucket").alias("overall"),
            )
            .collect()
        )
    by_f: dict[str, dict[str, int]] = {}
    latency_rows, series = [], []
    for r in grouped:
        if r["overall"]:
            by_f.setdefault(r["f"], {"ok": 0, "fail": 0, "info": 0})[r["type"]] = int(r["all"])
            if r["count"]:
                latency_rows.append(r)
        elif r["bucket"] is not None:
            series.append(r)
    stats["by_f"] = dict(sorted(by_f.items()))
    stats["latency"] = [
        {
            "f": r["f"],
            "type": r["type"],
            "count": int(r["count"]),
            "p50_ms": _ms(r["q"][0]),
            "p90_ms": _ms(r["q"][1]),
            "p99_ms": _ms(r["q"][2]),
            "max_ms": _ms(r["max"]),
        }
        for r in sorted(latency_rows, key=lambda r: (r["f"], r["type"]))
    ]
    stats["timeseries"] = {
        "bucket_s": bucket_s,
        "rows": [
            {
                "t": round(r["bucket"] * bucket_s, 6),
                "f": r["f"],
                "type": r["type"],
                "count": int(r["count"]),
                "p50_ms": _ms(r["q"][0]),
                "p99_ms": _ms(r["q"][2]),
                "max_ms": _ms(r["max"]),
            }
            for r in sorted(series, key=lambda r: (r["bucket"], r["f"], r["type"]))
        ],
    }
    lag_s = lag_bucket_seconds(duration_s, len(t.test["keys"]))
    lag = sorted((r["a"], r["key"], r["b"]) for r in passes.small(t).get(LAG, []))
    stats["lag"] = {
        "bucket_s": lag_s,
        "rows": [{"t": round(b * lag_s, 6), "key": int(k), "lag_ms": _ms(v)} for b, k, v in lag],
    }
    return stats
