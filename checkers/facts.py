"""The shared facts of docs/ANOMALIES.md's ground rules, as tables (for tests, tools and exports).

The finders do not read these: the per-key pass computes them on the fly.
Here a run of the same pass in its `facts` mode brings them out, built once
per run.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import passes
from checkers.history_format import OK, POLL
from checkers.keypass import BOUND, LOG, MUST, POSITION, Params
from checkers.load import Tables, stored_rows


def _facts(t: Tables) -> DataFrame:
    if "facts" not in t.cache:
        params = Params(mode="facts", read_txns=passes.main_params(t).read_txns)
        t.cache["facts"] = stored_rows(passes.key_pass(t, params), t.storage)
    return t.cache["facts"]


def ok_reads(t: Tables) -> DataFrame:
    """Records returned by polls of `ok` ops: the only reads that count as reads."""
    return t.mops.where((F.col("mf") == POLL) & (F.col("type") == OK)).select(
        "key", "value", "offset", "op", "mop_index", "process", "group", "complete_time", "poll", "f", "txn_id"
    )


def read_values(t: Tables) -> DataFrame:
    """Distinct (key, value) read by some `ok` op."""
    return ok_reads(t).select("key", "value").distinct()


def must_writes(t: Tables) -> DataFrame:
    """Sends that must have happened: key, value, offset, op, mop_index, read."""
    return (
        _facts(t)
        .where(F.col("tag") == MUST)
        .select(
            "key",
            "value",
            "offset",
            F.col("a").alias("op"),
            F.col("b").cast("int").alias("mop_index"),
            (F.col("c") == 1).alias("read"),
        )
    )


def log(t: Tables) -> DataFrame:
    """key, offset, index, value: every polled record plus every known-offset must-have-happened send."""
    return _facts(t).where(F.col("tag") == LOG).select("key", "offset", F.col("a").alias("index"), "value")


def positions(t: Tables) -> DataFrame:
    """key, value, position (first index of the value), offset (its first offset)."""
    return _facts(t).where(F.col("tag") == POSITION).select("key", "value", F.col("a").alias("position"), "offset")


def read_bound(t: Tables) -> DataFrame:
    """key, bound: the highest index at which any `ok` op read on the key."""
    return _facts(t).where(F.col("tag") == BOUND).select("key", F.col("a").alias("bound"))
