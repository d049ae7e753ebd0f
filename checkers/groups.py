"""Consumer-group offset-commit loss: the group committed past a record none of its members read."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform
from checkers.eos import committed_positions
from checkers.load import Tables


def find(t: Tables) -> DataFrame:
    """One row per (group, record) below the group's committed position and unread by the group's `ok` ops.

    Records are values that must have happened, placed at their first offset
    in the log; reads of `fail`/`info` ops do not count (ANOMALIES.md).
    """
    positions = committed_positions(t)
    records = (facts.must_writes(t).select("key", "value", F.col("op").alias("writer"))
               .join(facts.positions(t).select("key", "value", "offset"), ["key", "value"]))
    below = records.join(positions, "key").where(F.col("offset") < F.col("committed"))
    read = facts.ok_reads(t).where(F.col("group").isNotNull()).select("group", "key", "value").distinct()
    lost = below.join(read, ["group", "key", "value"], "left_anti")
    return conform(lost, "offset-commit-loss", ops=F.array("writer", "commit_op"), time=F.col("commit_time"))
