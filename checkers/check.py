"""`gregor check`: from a run directory to results.json.

Loads the run, runs every finder module there is, counts each anomaly in
Spark, keeps a few examples, decides allowed/bad and the verdict
(ANOMALIES.md), adds stats, nemesis windows, partition pictures and the Elle
section (RESULTS.md), and writes DIR/results.json atomically.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import time
from pathlib import Path

from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers import allowed as permissions
from checkers import nemesis_windows
from checkers.anomaly import union_all
from checkers.load import STORAGE, Tables, load
from checkers.pictures import partitions
from checkers.spark import get_spark

# Finder modules, each exposing find(t) -> DataFrame of ANOMALY_SCHEMA.
FINDERS = (
    "checkers.partition",
    "checkers.order",
    "checkers.cycles",
    "checkers.txn",
    "checkers.eos",
    "checkers.groups",
    "checkers.liveness",
)

EXAMPLE_FIELDS = ("key", "value", "values", "offset", "offsets", "ops", "cycle")


def _optional(module_name: str):
    """Imports a module that may not be built yet; a broken one still raises."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            return None
        raise


def run_finders(t: Tables, progress=print):
    """Returns (anomalies DataFrame, notes) over every finder module present."""
    frames, notes = [], []
    for name in FINDERS:
        module = _optional(name)
        if module is None or not hasattr(module, "find"):
            notes.append(f"{name} not available: its anomalies were not checked")
            continue
        started = time.monotonic()
        frame = module.find(t).persist(STORAGE)
        found = frame.count()
        progress(f"  {name.split('.')[-1]}: {found} instance(s) in {time.monotonic() - started:.1f}s")
        frames.append(frame)
    return union_all(t.spark, frames), notes


def _examples(anomalies, max_examples: int) -> dict[str, list[dict]]:
    ranked = anomalies.withColumn("_n", F.row_number().over(
        Window.partitionBy("name").orderBy(F.col("time").asc_nulls_last(), "key", "value", "offset")))
    examples: dict[str, list[dict]] = {}
    for row in ranked.where(F.col("_n") <= max(max_examples, 1)).orderBy("name", "_n").collect():
        examples.setdefault(row["name"], []).append(row.asDict())
    return examples


def _example(row: dict, windows: list[dict]) -> dict:
    example = {field: row[field] for field in EXAMPLE_FIELDS if row.get(field) is not None}
    if row.get("time") is not None:
        example["time_s"] = round(row["time"] / 1e9, 6)
    example["nemesis"] = nemesis_windows.active(windows, row.get("time"))
    return example


def _basic_stats(t: Tables) -> dict:
    """Counts the contract requires even when checkers.stats is missing."""
    row = (t.ops.where(F.col("process") != "nemesis")
           .agg(F.count(F.lit(1)).alias("ops"),
                F.sum(F.when(F.col("type") == "ok", 1).otherwise(0)).alias("ok"),
                F.sum(F.when(F.col("type") == "info", 1).otherwise(0)).alias("info"),
                F.sum(F.when(F.col("type") == "fail", 1).otherwise(0)).alias("fail"),
                F.sum(F.col("cut_short").cast("int")).alias("cut_short")).collect()[0])
    return {name: int(row[name] or 0) for name in ("ops", "ok", "info", "fail", "cut_short")}


def verdict(anomalies: dict, cut_short: bool, drain_complete: bool, empty: bool) -> tuple[str, list[str]]:
    """ANOMALIES.md: invalid if any bad anomaly; else unknown if cut short,
    drain incomplete or empty; else valid. Also returns the reasons."""
    bad = [name for name, entry in anomalies.items() if entry["count"] > 0 and not entry["allowed"]]
    if bad:
        return "invalid", [f"bad anomalies: {', '.join(sorted(bad))}"]
    reasons = []
    if cut_short:
        reasons.append("history cut short (an invoke with no completion)")
    if not drain_complete:
        reasons.append("drain incomplete")
    if empty:
        reasons.append("empty history")
    skipped = [name for name in anomalies if name in permissions.NOT_CHECKED]
    if skipped:
        reasons.append("a check was skipped: " + ", ".join(skipped))
    return ("unknown", reasons) if reasons else ("valid", [])


def check_tables(t: Tables, max_examples: int = 10, elle_jar: str | None = None, progress=print) -> dict:
    """The whole results.json dict for loaded tables (writes nothing)."""
    started = time.monotonic()
    anomalies_df, notes = run_finders(t, progress)
    anomalies_df = anomalies_df.persist(STORAGE)
    counts = {row["name"]: int(row["count"]) for row in anomalies_df.groupBy("name").count().collect()}
    examples = _examples(anomalies_df, max_examples) if counts else {}
    windows = nemesis_windows.windows(nemesis_windows.nemesis_ops(t))
    anomalies = {}
    for name in sorted(counts):
        why = permissions.why_allowed(name, t.test)
        anomalies[name] = {
            "count": counts[name], "allowed": why is not None, "why_allowed": why,
            "description": permissions.describe(name),
            "examples": [_example(row, windows) for row in examples.get(name, [])][:max_examples],
        }
    stats = _basic_stats(t)
    cut_short = stats.pop("cut_short") > 0
    events = t.events.count()
    stats["events"] = events
    stats_module = _optional("checkers.stats")
    if stats_module is not None:
        stats.update(stats_module.compute_stats(t))
    else:
        notes.append("checkers.stats not available: only op counts in stats")
    result = {"verdict": None, "anomalies": anomalies, "cut_short": cut_short}
    result["verdict"], result["verdict_reasons"] = verdict(
        anomalies, cut_short, permissions.drain_complete(t.test), stats["ops"] == 0)
    result["config"] = permissions.config(t.test)
    result["stats"] = stats
    result["nemesis"] = nemesis_windows.public(windows)
    result["partitions"] = partitions(t, anomalies_df) if counts else {}
    elle_module = _optional("checkers.elle")
    if elle_module is not None and hasattr(elle_module, "elle_section"):
        result["elle"] = elle_module.elle_section(t, t.directory, elle_jar)
    else:
        result["elle"] = {"available": False, "reason": "checkers.elle is not part of this build"}
    seconds = time.monotonic() - started
    result["checker"] = {"engine": "spark", "seconds": round(seconds, 3),
                         "events_per_s": round(events / seconds, 1) if seconds > 0 else None,
                         "spark_master": t.spark.sparkContext.master}
    if notes:
        result["notes"] = notes
    anomalies_df.unpersist()
    return result


def write_json_atomically(path: Path, data: dict) -> None:
    """Writes via a temp file in the same folder and a rename, so a reader
    never sees half a results.json."""
    handle, temp = tempfile.mkstemp(prefix=".results-", suffix=".json.tmp", dir=str(path.parent))
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=1, default=str)
            out.write("\n")
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def check_dir(path, spark=None, max_examples: int = 10, elle_jar: str | None = None, progress=print) -> dict:
    """Checks a run directory and writes DIR/results.json; returns the results.

    Bad input raises GregorError before anything is written.
    """
    directory = Path(path)
    spark = spark or get_spark()
    progress(f"checking {directory} on Spark {spark.sparkContext.master}")
    kept_before = _persistent_rdds(spark)
    t = load(directory, spark)
    try:
        result = check_tables(t, max_examples=max_examples, elle_jar=elle_jar, progress=progress)
    finally:
        for frame in list(t.cache.values()) + [t.mops, t.ops, t.events]:
            frame.unpersist()
        _release_rdds_since(spark, kept_before)
    write_json_atomically(directory / "results.json", result)
    return result


def _persistent_rdds(spark) -> set[int]:
    return set(spark.sparkContext._jsc.getPersistentRDDs().keys())


def _release_rdds_since(spark, kept_before: set[int]) -> None:
    """Frees the local checkpoints this check made (DataFrame.unpersist does
    not release them), so a long-lived session checking many runs (the test
    suite, a service) does not fill the driver's heap."""
    persistent = spark.sparkContext._jsc.getPersistentRDDs()
    for rdd_id in list(persistent.keys()):
        if rdd_id not in kept_before:
            persistent[rdd_id].unpersist(False)
