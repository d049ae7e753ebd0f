"""The `stats` section of results.json (docs/RESULTS.md): counts, latency
quantiles per op and outcome, throughput over time and consumers' lag.

Counts and the run's span come from the load's own metrics; latency and
throughput come from the op rows, read from the partitions that hold them
(the load's metrics name them); lag comes from the per-key pass. Only
aggregates (a few hundred rows per series) reach the driver.

Quantiles come from a log-linear histogram of the latencies (SUB_BITS bins
per doubling), counted by hash per time bucket, (f, type) and bin, with
each bin's smallest and largest latency. A quantile is the latency of rank
ceil(q * n): its bin's smallest or largest when it is that bin's first or
last, else the bin's largest, at most 1/128 above the exact value. Every
figure is a latency the run measured, and a sum, a minimum or a maximum
does not depend on how the rows are split among tasks. `percentile_approx`
did the same with Spark's quantile sketches: at 10M events their merge was
a stage of its own, about half of the stats job's time (docs/CHECKERS.md).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers import passes
from checkers.buckets import bucket_seconds, lag_bucket_seconds
from checkers.history_format import NEMESIS
from checkers.keypass import LAG
from checkers.load import Tables
from checkers.routes import rows_in_partitions
from checkers.table_format import OP_ROW

QUANTILES = (0.5, 0.9, 0.99)
# Bins per doubling of the latency, as a power of two: 2**7 = 128, so a
# bin spans at most 1/128 of its smallest latency. Below 2**(SUB_BITS + 1)
# ns each latency is a bin of its own.
SUB_BITS = 7


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
    grouped = _quantiles(ops.select("f", "type", latency, bucket)).collect()
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


def latency_bin(latency: str = "latency") -> Column:
    """The histogram bin of a latency in ns (SUB_BITS): the latency itself
    below 2**(SUB_BITS + 1), else its top SUB_BITS + 1 bits and their
    place. Bins grow with the latency, so the order of bins is that of the
    latencies in them. (log2 of a double may land just under a power of two:
    the shift is put right by what it leaves.)"""
    guess = f"cast(floor(log2({latency})) as int)"
    high = (
        f"(case when shiftright({latency}, {guess}) >= 2 then {guess} + 1"
        f" when shiftright({latency}, {guess}) < 1 then {guess} - 1 else {guess} end)"
    )
    shift = f"({high} - {SUB_BITS})"
    return F.expr(
        f"case when {latency} < {1 << (SUB_BITS + 1)} then {latency}"
        f" else shiftleft(cast({shift} as bigint), {SUB_BITS}) + shiftright({latency}, {shift}) end"
    )


def _quantiles(ops: DataFrame) -> DataFrame:
    """Per (f, type) overall and per (bucket, f, type): `all` ops, `count`
    with a latency, its QUANTILES as `q` and its `max`; `overall` tells the
    two apart (a bucket is null for an op cut short)."""
    # One aggregation gives both: a second one over `bins` read the op rows again.
    both = (
        ops.select("*", latency_bin().alias("bin"))
        .groupingSets([["bucket", "f", "type", "bin"], ["f", "type", "bin"]], "bucket", "f", "type", "bin")
        .agg(
            F.grouping("bucket").alias("overall"),
            F.count(F.lit(1)).alias("all"),
            F.count("latency").alias("n"),
            F.min("latency").alias("low"),
            F.max("latency").alias("high"),
        )
    )
    group = ("overall", "bucket", "f", "type")
    before = F.sum("n").over(
        Window.partitionBy(*group).orderBy("bin").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ) - F.col("n")
    ranked = both.select("*", before.alias("before"), F.sum("n").over(Window.partitionBy(*group)).alias("count"))
    quantiles = []
    for q in QUANTILES:
        rank = F.greatest(F.lit(1), F.ceil(F.col("count") * q))
        inside = (F.col("before") < rank) & (rank <= F.col("before") + F.col("n"))
        value = F.when(F.col("before") + 1 == rank, F.col("low")).otherwise(F.col("high"))
        quantiles.append(F.max(F.when(inside, value)))
    return ranked.groupBy(*group).agg(
        F.sum("all").alias("all"),
        F.max("count").alias("count"),
        F.array(*quantiles).alias("q"),
        F.max("high").alias("max"),
    )
