"""Exactly-once consume-transform-produce: duplicated and lost copies (eos-duplicate, eos-lost).

A copier group is a group whose `ok` txn ops carry commit mops; its inputs
are the keys of those commits, and an output names its input with `from`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform
from checkers.load import Tables


def find(t: Tables) -> DataFrame:
    return duplicates(t).unionByName(losses(t))


def _ok_commits(t: Tables) -> DataFrame:
    return t.mops.where((F.col("mf") == "commit") & (F.col("type") == "ok") & F.col("group").isNotNull())


def copier_groups(t: Tables) -> DataFrame:
    """group: every group with an `ok` txn op carrying a commit mop, and
    whose ops derive outputs (a send with `from`).

    ANOMALIES.md names a group whose `ok` txn ops carry commit mops a copier
    group; a transactional consumer that commits its offsets in the same
    transaction but writes nothing derived from them (the `txn` workload
    polling through a group) copies nothing, so no input of it can be lost.
    """
    committing = _ok_commits(t).where(F.col("f") == "txn").select("group").distinct()
    deriving = (t.mops.where((F.col("mf") == "send") & F.col("from_key").isNotNull())
                .select("group").distinct())
    return committing.join(deriving, "group", "left_semi")


def committed_positions(t: Tables, groups: DataFrame | None = None) -> DataFrame:
    """group, key, committed (highest `ok` commit offset), commit_op, commit_time of that commit."""
    commits = _ok_commits(t)
    if groups is not None:
        commits = commits.join(groups, "group", "left_semi")
    best = Window.partitionBy("group", "key").orderBy(F.desc("offset"), "op")
    return (commits.withColumn("rank", F.row_number().over(best)).where(F.col("rank") == 1)
            .select("group", "key", F.col("offset").alias("committed"), F.col("op").alias("commit_op"),
                    F.col("complete_time").alias("commit_time")))


def _outputs(t: Tables) -> DataFrame:
    """Outputs that must have happened, of copier groups' ops, with their input record."""
    return (facts.must_writes(t).where(F.col("from_key").isNotNull())
            .join(copier_groups(t), "group", "left_semi"))


def duplicates(t: Tables) -> DataFrame:
    """One row per input record that is the source of two or more outputs that must have happened."""
    per_input = (_outputs(t).groupBy("group", "from_key", "from_value")
                 .agg(F.collect_set(F.struct("key", "value")).alias("outs"),
                      F.array_sort(F.collect_set("op")).alias("ops"),
                      F.max("complete_time").alias("time"))
                 .where(F.size("outs") >= 2))
    offsets = facts.positions(t).select(F.col("key").alias("from_key"), F.col("value").alias("from_value"), "offset")
    found = per_input.join(offsets, ["from_key", "from_value"], "left")
    return conform(found, "eos-duplicate", key=F.col("from_key"), value=F.col("from_value"),
                   values=F.array_sort(F.transform("outs", lambda o: o["value"])))


def losses(t: Tables) -> DataFrame:
    """One row per input record below the group's committed position that no output came from."""
    positions = committed_positions(t, copier_groups(t))
    records = (facts.must_writes(t).select("key", "value", F.col("op").alias("writer"))
               .join(facts.positions(t).select("key", "value", "offset"), ["key", "value"]))
    below = records.join(positions, "key").where(F.col("offset") < F.col("committed"))
    copied = _outputs(t).select("group", F.col("from_key").alias("key"), F.col("from_value").alias("value")).distinct()
    lost = below.join(copied, ["group", "key", "value"], "left_anti")
    return conform(lost, "eos-lost", ops=F.array("writer", "commit_op"), time=F.col("commit_time"))
