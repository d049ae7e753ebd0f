"""Safety anomalies of one partition (ANOMALIES.md, first table, first seven rows).

inconsistent-offsets, duplicate, lost-write, unseen, aborted-read,
uncommitted-read, precommitted-read. Each is a join or a group-by over the
shared facts; nothing leaves Spark.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import facts
from checkers.anomaly import conform, union_all
from checkers.load import Tables

NAMES = ("inconsistent-offsets", "duplicate", "lost-write", "unseen", "aborted-read",
         "uncommitted-read", "precommitted-read")


def _op_time():
    """When an op happened: its completion, or its invoke when cut short."""
    return F.coalesce(F.col("complete_time"), F.col("invoke_time"))


def observations(t: Tables) -> DataFrame:
    """Every (key, offset, value) the log was built from, with the op that saw or wrote it."""
    polled = t.mops.where(F.col("mf") == "poll").select("key", "offset", "value", "op", _op_time().alias("time"))
    sent = (facts.must_writes(t).where(F.col("offset").isNotNull())
            .select("key", "offset", "value", "op", _op_time().alias("time")))
    return polled.unionByName(sent)


def inconsistent_offsets(t: Tables) -> DataFrame:
    # Candidates from the (distinct) log first; only their observations are grouped.
    suspects = (facts.log(t).groupBy("key", "offset").agg(F.count(F.lit(1)).alias("n"))
                .where(F.col("n") >= 2).select("key", "offset"))
    grouped = (observations(t).join(suspects, ["key", "offset"], "left_semi")
               .groupBy("key", "offset")
               .agg(F.array_sort(F.collect_set("value")).alias("values"),
                    F.array_sort(F.collect_set("op")).alias("ops"),
                    F.min("time").alias("time")))
    return conform(grouped, "inconsistent-offsets")


def duplicate(t: Tables) -> DataFrame:
    suspects = (facts.log(t).groupBy("key", "value").agg(F.countDistinct("offset").alias("n"))
                .where(F.col("n") >= 2).select("key", "value"))
    grouped = (observations(t).join(suspects, ["key", "value"], "left_semi")
               .groupBy("key", "value")
               .agg(F.array_sort(F.collect_set("offset")).alias("offsets"),
                    F.array_sort(F.collect_set("op")).alias("ops"),
                    F.max("time").alias("time")))
    return conform(grouped, "duplicate", offset=F.col("offsets")[0])


def _unread_must_writes(t: Tables) -> DataFrame:
    """Must-have-happened writes no `ok` op read, with their position and the key's read bound."""
    unread = (facts.must_writes(t).where(~F.col("read"))
              .select("key", "value", F.col("offset").alias("sent_offset"), "op",
                      _op_time().alias("time"))
              .dropDuplicates(["key", "value"]))
    return (unread.join(facts.positions(t), ["key", "value"], "left")
            .join(facts.read_bound(t), ["key"], "left"))


def _lost_condition():
    return F.col("position").isNotNull() & F.col("bound").isNotNull() & (F.col("position") <= F.col("bound"))


def lost_write(t: Tables) -> DataFrame:
    """Unread must-have-happened values at or below the highest index any `ok` op read."""
    # One reader at the bound shows the value should have been seen.
    bound_readers = (facts.ok_reads(t).join(facts.log(t).select("key", "offset", "index").distinct(), ["key", "offset"])
                     .join(facts.read_bound(t), ["key"])
                     .where(F.col("index") == F.col("bound"))
                     .groupBy("key").agg(F.min("op").alias("bound_op")))
    lost = _unread_must_writes(t).where(_lost_condition()).join(bound_readers, ["key"], "left")
    return conform(lost, "lost-write",
                   offset=F.coalesce(F.col("offset"), F.col("sent_offset")),
                   ops=F.array_distinct(F.array_compact(F.array(F.col("op"), F.col("bound_op")))))


def unseen(t: Tables) -> DataFrame:
    """Unread must-have-happened values that are not lost (no position, or above the bound)."""
    rest = _unread_must_writes(t).where(~_lost_condition())
    return conform(rest, "unseen", offset=F.coalesce(F.col("offset"), F.col("sent_offset")),
                   ops=F.array(F.col("op")))


def _reads_with_writers(t: Tables, writer_filter) -> DataFrame:
    writers = (t.mops.where((F.col("mf") == "send") & writer_filter)
               .select("key", "value", F.col("op").alias("writer"), F.col("process").alias("writer_process"),
                       F.col("commit_time").alias("writer_commit_time"), F.col("type").alias("writer_type")))
    reads = facts.ok_reads(t).select("key", "value", "offset", F.col("op").alias("reader"),
                                     F.col("process").alias("reader_process"),
                                     F.col("complete_time").alias("time"))
    return reads.join(writers, ["key", "value"])


def aborted_read(t: Tables) -> DataFrame:
    """`ok` reads of a value whose send op (or transaction) ended `fail`."""
    rows = _reads_with_writers(t, F.col("type") == "fail")
    return conform(rows, "aborted-read", ops=F.array(F.col("writer"), F.col("reader")))


def uncommitted_read(t: Tables) -> DataFrame:
    """Another process's `ok` read that completed before the writer's transaction committed."""
    rows = (_reads_with_writers(t, (F.col("type") != "fail") & F.col("commit_time").isNotNull())
            .where((F.col("reader_process") != F.col("writer_process"))
                   & (F.col("writer_commit_time") > F.col("time"))))
    return conform(rows, "uncommitted-read", ops=F.array(F.col("writer"), F.col("reader")))


def precommitted_read(t: Tables) -> DataFrame:
    """An `ok` op that read back a value it sent itself in that same op."""
    own = t.mops.where(F.col("mf") == "send").select("op", "key", "value")
    rows = facts.ok_reads(t).join(own, ["op", "key", "value"]).select(
        "key", "value", "offset", "op", F.col("complete_time").alias("time"))
    return conform(rows.dropDuplicates(["op", "key", "value"]), "precommitted-read", ops=F.array(F.col("op")))


def find(t: Tables) -> DataFrame:
    return union_all(t.spark, [inconsistent_offsets(t), duplicate(t), lost_write(t), unseen(t),
                               aborted_read(t), uncommitted_read(t), precommitted_read(t)])
