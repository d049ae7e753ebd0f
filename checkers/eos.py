"""Exactly-once consume-transform-produce: duplicated and lost copies (eos-duplicate, eos-lost).

A copier group is a group whose ops derive outputs (sends with `from`) and
that commits its input positions in `ok` ops: commit mops inside its
transactions (send_offsets_to_transaction) or `commit` ops of its own; its
inputs are the keys of those commits (passes.cross_key_facts finds the
groups). The per-key pass emits the outputs that must have happened and
the input records below each copier group's committed position; the rest
is two small joins. When the run's consumers read uncommitted records, a
read of an `info` transaction's output does not prove that it committed:
such an output counts as a copy (no eos-lost) but not as a second one (no
eos-duplicate).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import passes
from checkers.anomaly import conform, empty_anomalies, union_all
from checkers.keypass import EOS_OUT, EOS_POS, EOS_REC, EOS_UNPROVEN
from checkers.load import Tables

NAMES = ("eos-duplicate", "eos-lost")


def applies(t: Tables) -> bool:
    """Whether the run has copier groups: without them there is nothing to find (and no job to run)."""
    passes.main_params(t)
    return bool(t.cache["prior"]["copier_groups"])


def find(t: Tables) -> DataFrame:
    if not applies(t):
        return empty_anomalies(t.spark)
    return union_all(t.spark, [duplicates(t), losses(t)])


def _outputs(t: Tables, tags=(EOS_OUT,)) -> DataFrame:
    """Outputs that must have happened, of copier groups' ops, with their input
    record (with EOS_UNPROVEN also those whose transaction may have aborted)."""
    return (
        passes.main(t)
        .where(F.col("tag").isin(*tags))
        .select(
            F.col("a").alias("group"),
            F.col("b").alias("from_key"),
            F.col("c").alias("from_value"),
            "key",
            "value",
            F.col("d").alias("op"),
            F.col("time").alias("complete_time"),
        )
    )


def duplicates(t: Tables) -> DataFrame:
    """One row per input record that is the source of two or more outputs that must have happened."""
    per_input = (
        _outputs(t)
        .groupBy("group", "from_key", "from_value")
        .agg(
            F.collect_set(F.struct("key", "value")).alias("outs"),
            F.array_sort(F.collect_set("op")).alias("ops"),
            F.max("complete_time").alias("time"),
        )
        .where(F.size("outs") >= 2)
    )
    offsets = (
        passes.main(t)
        .where(F.col("tag") == EOS_POS)
        .select(F.col("key").alias("from_key"), F.col("value").alias("from_value"), "offset")
    )
    found = per_input.join(offsets, ["from_key", "from_value"], "left")
    return conform(
        found,
        "eos-duplicate",
        key=F.col("from_key"),
        value=F.col("from_value"),
        values=F.array_sort(F.transform("outs", lambda o: o["value"])),
    )


def losses(t: Tables) -> DataFrame:
    """One row per input record below the group's committed position that no output came from."""
    below = (
        passes.main(t)
        .where(F.col("tag") == EOS_REC)
        .select(
            F.col("a").alias("group"),
            "key",
            "value",
            "offset",
            F.col("b").alias("writer"),
            F.col("c").alias("commit_op"),
            F.col("time").alias("commit_time"),
        )
    )
    copied = (
        _outputs(t, (EOS_OUT, EOS_UNPROVEN))
        .select("group", F.col("from_key").alias("key"), F.col("from_value").alias("value"))
        .distinct()
    )
    lost = below.join(copied, ["group", "key", "value"], "left_anti")
    return conform(lost, "eos-lost", ops=F.array("writer", "commit_op"), time=F.col("commit_time"))
