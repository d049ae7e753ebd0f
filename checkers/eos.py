"""Exactly-once consume-transform-produce: duplicated and lost copies (eos-duplicate, eos-lost).

A copier group is a group whose ops derive outputs (sends with `from`) and
that commits its input positions in `ok` ops: commit mops inside its
transactions (send_offsets_to_transaction) or `commit` ops of its own; its
inputs are the keys of those commits (passes.cross_key_facts finds the
groups). The per-key pass emits the outputs that must have happened, and
on each input key, from the copier-input markers there, the few inputs a
join can still find something about: those with two or more derived sends
of one group (EOS_POS), and those below a copier group's committed position
that no `ok` op of the group copied (EOS_REC); it also counts them
(EOS_COUNT). The rest is two joins with what the pass found, each skipped
when its side is empty and broadcast when it is counted small. When the
run's consumers read uncommitted records, a read of an `info` transaction's
output does not prove that it committed: such an output counts as a copy
(no eos-lost) but not as a second one (no eos-duplicate).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import passes
from checkers.anomaly import conform, empty_anomalies, union_all
from checkers.keypass import EOS_COUNT, EOS_INFO_OUT, EOS_OUT, EOS_POS, EOS_REC, EOS_UNPROVEN
from checkers.load import Tables
from checkers.spark import broadcast_if_small

NAMES = ("eos-duplicate", "eos-lost")


def applies(t: Tables) -> bool:
    """Whether the run has copier groups: without them there is nothing to find (and no job to run)."""
    passes.main_params(t)
    return bool(t.cache["prior"]["copier_groups"])


def find(t: Tables) -> DataFrame:
    if not applies(t):
        return empty_anomalies(t.spark)
    counts = _counts(t)
    frames = []
    if counts["twice"]:
        frames.append(duplicates(t, counts))
    if counts["below"]:
        frames.append(losses(t, counts))
    return union_all(t.spark, frames)


def _counts(t: Tables) -> dict:
    """How many rows the pass made of each tag eos joins on (EOS_COUNT)."""
    rows = passes.small(t).get(EOS_COUNT, [])
    return {name: sum(row[column] for row in rows) for name, column in (("twice", "a"), ("below", "b"), ("info", "c"))}


def _outputs(t: Tables, tags) -> DataFrame:
    """Outputs of copier groups' ops that must have happened (or, with
    EOS_UNPROVEN, may have), with their input record."""
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


def duplicates(t: Tables, counts: dict) -> DataFrame:
    """One row per input record that is the source of two or more outputs
    that must have happened: of the inputs with two or more derived sends
    of one group (EOS_POS), the only ones that can be."""
    inputs = ["group", "from_key", "from_value"]
    twice = broadcast_if_small(
        passes.main(t)
        .where(F.col("tag") == EOS_POS)
        .select(
            F.col("a").alias("group"), F.col("key").alias("from_key"), F.col("value").alias("from_value"), "offset"
        ),
        counts["twice"],
    )
    # One EOS_POS row per input: its offset (NULL when unplaced) goes along through the grouping.
    per_input = (
        _outputs(t, (EOS_OUT, EOS_INFO_OUT))
        .join(twice, inputs)
        .groupBy(*inputs, "offset")
        .agg(
            F.collect_set(F.struct("key", "value")).alias("outs"),
            F.array_sort(F.collect_set("op")).alias("ops"),
            F.max("complete_time").alias("time"),
        )
        .where(F.size("outs") >= 2)
    )
    return conform(
        per_input,
        "eos-duplicate",
        key=F.col("from_key"),
        value=F.col("from_value"),
        values=F.array_sort(F.transform("outs", lambda o: o["value"])),
    )


def losses(t: Tables, counts: dict) -> DataFrame:
    """One row per input record below the group's committed position that
    no output came from. The pass left out those an `ok` op copied, so only
    an `info` op's output (EOS_INFO_OUT, EOS_UNPROVEN) can still have."""
    lost = (
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
    if counts["info"]:
        copied = _outputs(t, (EOS_INFO_OUT, EOS_UNPROVEN)).select(
            "group", F.col("from_key").alias("key"), F.col("from_value").alias("value")
        )
        lost = lost.join(broadcast_if_small(copied, counts["info"]), ["group", "key", "value"], "left_anti")
    return conform(lost, "eos-lost", ops=F.array("writer", "commit_op"), time=F.col("commit_time"))
