"""The loaded table's rows of a few routes, read from the partitions that hold them only.

The load stores its rows hash-partitioned by route (a key for key rows, a
process for op rows; checkers/load.py), so the rows of a few keys or
processes lie in a few of its partitions. A filter on `route` still reads
every partition: at 10M events the table is on disk, and each full read of
it took 3 to 4 s of both cores (docs/CHECKERS.md). The finders that want a
few routes (the cycle search's processes and its keys near a span, the
pictures' keys) read those partitions alone, through Spark's partition-pruning RDD over the stored one (made
into a frame by the session's `internalCreateDataFrame`, internal to Spark;
where it is missing, every partition is read).

A table whose plan does not say it is hash-partitioned by route (a table
not stored by the load) is filtered the ordinary way.
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# How Spark names the stored table's partitioning (HashPartitioning's text).
_BY_ROUTE = re.compile(r"hashpartitioning\(route#\d+L?, (\d+)\)")


def rows_of_routes(rows: DataFrame, routes: list[int]) -> DataFrame:
    """The rows of `rows` whose route is one of `routes`: from their
    partitions only when `rows` is a stored table partitioned by route."""
    routes = sorted({int(route) for route in routes})
    chosen = F.col("route").isin(routes) if routes else F.lit(False)
    count = route_partitions(rows)
    if count is None:
        return rows.where(chosen)
    return rows_in_partitions(rows, partitions_of(routes, count)).where(chosen)


def rows_in_partitions(rows: DataFrame, partitions: list[int]) -> DataFrame:
    """`rows` read from these partitions only, when `rows` is a stored table
    partitioned by route; else (or when they are all of it) every row."""
    count = route_partitions(rows)
    if count is None or len(set(partitions)) >= count:
        return rows
    try:
        return pruned(rows, sorted(set(partitions)))
    except Py4JError:  # a Spark without these internals: read every partition (tests/checkers/test_routes.py fails)
        return rows


def route_partitions(rows: DataFrame) -> int | None:
    """How many partitions a stored table hash-partitioned by route has, or
    None when its plan does not say it is one (then no partition is skipped)."""
    plan = rows._jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRDD":
        return None
    found = _BY_ROUTE.fullmatch(plan.outputPartitioning().toString())
    if found is None or int(found.group(1)) != plan.rdd().getNumPartitions():
        return None
    return int(found.group(1))


def partitions_of(routes: list[int], count: int) -> list[int]:
    """The partitions that hold these routes: what Spark's hash partitioning
    computes, pmod(murmur3 hash, count), here in Python. Asked of Spark, each
    call was a job (0.9 s the first time in a 10M check, docs/CHECKERS.md)."""
    return sorted({spark_hash(route) % count for route in routes})


_MASK = 0xFFFFFFFF


def spark_hash(value: int) -> int:
    """Spark SQL's `hash` of a bigint: 32-bit murmur3 of its two halves, low
    first, with Spark's seed 42, as a signed int."""

    def rotated(x: int, bits: int) -> int:
        return ((x << bits) | (x >> (32 - bits))) & _MASK

    def mixed(h: int, half: int) -> int:
        k = rotated((half * 0xCC9E2D51) & _MASK, 15) * 0x1B873593 & _MASK
        return (rotated(h ^ k, 13) * 5 + 0xE6546B64) & _MASK

    value &= (1 << 64) - 1
    h = mixed(mixed(42, value & _MASK), value >> 32) ^ 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def pruned(rows: DataFrame, partitions: list[int]) -> DataFrame:
    """A stored table's rows in these partitions only (the others are never read)."""
    spark = rows.sparkSession
    jvm = spark._jvm
    stored = rows._jdf.queryExecution().analyzed().rdd()
    keep = jvm.PythonUtils.toSeq(list(partitions)).toSet()  # a Scala Set is a function of a partition number
    kept = jvm.org.apache.spark.rdd.PartitionPruningRDD.create(stored, keep)
    return DataFrame(spark._jsparkSession.internalCreateDataFrame(kept, rows._jdf.schema(), False), spark)
