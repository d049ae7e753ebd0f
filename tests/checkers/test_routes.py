"""checkers/routes.py: a few routes' rows, read from the partitions that hold them only."""

from __future__ import annotations

import random

import pytest
from pyspark import StorageLevel
from pyspark.sql import functions as F

from checkers.load import free_rows, stored_rows
from checkers.routes import partitions_of, route_partitions, rows_in_partitions, rows_of_routes, spark_hash


@pytest.fixture
def by_route(spark):
    """A table stored as the load stores its rows: hash-partitioned by route (keys and negative process routes)."""
    frame = spark.range(0, 6000).select(((F.col("id") % 150) - 40).alias("route"), F.col("id"))
    table = stored_rows(frame.repartition(7, "route"), StorageLevel.MEMORY_AND_DISK)
    yield table
    free_rows(table)


def test_the_partitions_named_are_where_spark_put_the_routes(spark, by_route):
    placed = {r["route"]: r["p"] for r in by_route.select("route", F.spark_partition_id().alias("p")).collect()}
    assert route_partitions(by_route) == 7
    for route, partition in placed.items():
        assert partitions_of([route], 7) == [partition]


def test_the_hash_is_sparks_own_for_any_bigint(spark):
    rng = random.Random(5)
    values = [0, 1, -1, -2, 2**31, -(2**31), 2**32, 2**63 - 1, -(2**63), -(1 << 62)]
    values += [rng.randrange(-(2**63), 2**63) for _ in range(500)]
    values += [rng.randrange(-(2**20), 2**20) for _ in range(500)]
    frame = spark.createDataFrame([(v,) for v in values], "route long")
    for row in frame.select("route", F.expr("hash(route)").alias("h")).collect():
        assert spark_hash(row["route"]) == row["h"], row["route"]


def test_rows_of_routes_reads_only_their_partitions(spark, by_route):
    rng = random.Random(3)
    for routes in ([-40], [5, -3], rng.sample(range(-40, 110), 3), []):
        got = rows_of_routes(by_route, routes)
        expected = sorted(r["id"] for r in by_route.where(F.col("route").isin(routes)).collect()) if routes else []
        assert sorted(r["id"] for r in got.collect()) == expected
        holding = partitions_of(routes, 7)
        assert got.rdd.getNumPartitions() == len(holding) < 7


def test_a_table_not_stored_by_route_is_filtered_whole(spark, by_route):
    filtered = by_route.where(F.col("id") % 2 == 0)  # a filter of the stored table: no longer its plan
    assert route_partitions(filtered) is None
    got = rows_of_routes(filtered, [5])
    assert got.rdd.getNumPartitions() == 7
    assert sorted(r["id"] for r in got.collect()) == sorted(
        r["id"] for r in by_route.where((F.col("route") == 5) & (F.col("id") % 2 == 0)).collect()
    )
    plain = spark.range(0, 100).select((F.col("id") % 5).alias("route"), "id")
    assert route_partitions(plain) is None
    assert rows_of_routes(plain, [1, 2]).count() == 40


def test_rows_in_partitions_reads_those_partitions_only(spark, by_route):
    placed = by_route.select("id", F.spark_partition_id().alias("p"))
    for partitions in ([3], [0, 6, 6], list(range(7))):
        got = rows_in_partitions(by_route, partitions)
        expected = sorted(r["id"] for r in placed.where(F.col("p").isin(partitions)).collect())
        assert sorted(r["id"] for r in got.collect()) == expected
        assert got.rdd.getNumPartitions() == len(set(partitions))
    filtered = by_route.where(F.col("id") % 2 == 0)  # no longer the stored table: read whole
    assert rows_in_partitions(filtered, [3]).count() == 3000
