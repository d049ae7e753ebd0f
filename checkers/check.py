"""`gregor check`: from a run directory to results.json.

Loads the run (one parse, one table), runs the per-key pass and the few
finders that span keys, counts each anomaly and keeps a few examples,
decides allowed/bad and the verdict (docs/ANOMALIES.md), adds stats,
nemesis windows, partition pictures and the Elle section (docs/RESULTS.md),
and writes DIR/results.json atomically. A check is a handful of Spark jobs
whatever the history's size; each finder that has nothing to look at (no
transactions, no copier groups, no late reads, no cycle span) costs none.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers import allowed as permissions
from checkers import cycles, eos, liveness, nemesis_windows, passes, txn
from checkers.anomaly import ANOMALY_SCHEMA
from checkers.elle import elle_section
from checkers.examples import example_key, named_offsets
from checkers.load import Tables, history_path, load
from checkers.pictures import partitions
from checkers.spark import driver_memory, get_spark, out_of_memory, session_conf
from checkers.stats import compute_stats
from ground.atomic import write_json

EXAMPLE_FIELDS = ("key", "value", "values", "offset", "offsets", "ops", "cycle")


def _example(row: dict, windows: list[dict]) -> dict:
    example = {field: row[field] for field in EXAMPLE_FIELDS if row.get(field) is not None}
    if row.get("time") is not None:
        example["time_s"] = round(row["time"] / 1e9, 6)
    example["nemesis"] = nemesis_windows.active(windows, row.get("time"))
    return example


def verdict(
    anomalies: dict, cut_short: bool, drain_complete: bool, empty: bool, torn: bool = False
) -> tuple[str, list[str]]:
    """docs/ANOMALIES.md: invalid if any bad anomaly; else unknown if cut short,
    drain incomplete or empty; else valid. Also returns the reasons."""
    bad = [name for name, entry in anomalies.items() if entry["count"] > 0 and not entry["allowed"]]
    if bad:
        return "invalid", [f"bad anomalies: {', '.join(sorted(bad))}"]
    reasons = []
    if torn:
        reasons.append("history cut short (its last line was cut off mid-write and left out)")
    elif cut_short:
        reasons.append("history cut short (an invoke with no completion)")
    if not drain_complete:
        reasons.append("drain incomplete")
    if empty:
        reasons.append("empty history")
    skipped = [name for name in anomalies if name in permissions.NOT_CHECKED]
    if skipped:
        reasons.append("a check was skipped: " + ", ".join(skipped))
    return ("unknown", reasons) if reasons else ("valid", [])


def _frame_counts_and_examples(frame, max_examples: int) -> tuple[dict, dict, list]:
    """Counts, first examples and the keys/offsets named, of an anomaly DataFrame (one job)."""
    by_name = Window.partitionBy("name")
    rows = (
        frame.select(
            "*",
            F.row_number().over(by_name.orderBy(*passes.example_order())).alias("_n"),
            F.count(F.lit(1)).over(by_name).alias("_count"),
        )
        .where(F.col("_n") <= max(max_examples, 1))
        .collect()
    )
    counts = {row["name"]: row["_count"] for row in rows}
    examples: dict = {}
    for row in sorted(rows, key=lambda r: r["_n"]):
        examples.setdefault(row["name"], []).append(row.asDict())
    return counts, examples, rows


def find_anomalies(t: Tables, max_examples: int, progress=print) -> tuple[dict, dict, dict, dict]:
    """(counts, examples, named, stats) over every finder: named maps each key
    an anomaly names to the lowest offset named on it (None: the key only).

    After the per-key pass, whose small rows every other finder reads, the
    jobs run on two lanes at once: the cycle search on one, the other
    finders and the stats on the other. A lane's planning and Python then
    run while the other lane's jobs use the cores (a small check spends
    about a third of its time outside jobs). Results are merged in a fixed
    order, so they do not depend on which lane finishes first.
    """
    started = time.monotonic()
    counts, examples = passes.collect(t, max_examples)
    main_named = passes.small(t).get(passes.NAMED_TAG, [])
    progress(f"  per-key pass: {sum(counts.values())} instance(s) in {time.monotonic() - started:.1f}s")
    named = {row["key"]: row["offset"] for row in main_named}
    examples = {name: [dict(row) for row in rows] for name, rows in examples.items()}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="gregor-check") as pool:
        cycle_lane = pool.submit(_timed, progress, "cycles", lambda: _anomaly_rows(cycles.cycle_rows(t)))
        other_lane = pool.submit(_other_lane, t, max_examples, progress)
        try:
            found_cycles = cycle_lane.result()
            (found_txn, found_stuck, found_eos), stats = other_lane.result()
        except KeyboardInterrupt:
            t.spark.sparkContext.cancelAllJobs()  # else the pool waits for the lanes' jobs to end
            raise
    for rows in (found_txn, found_stuck, found_cycles):
        _merge(counts, examples, named, rows, max_examples)
    eos_counts, eos_examples, eos_rows = found_eos
    counts.update(eos_counts)
    examples.update(eos_examples)
    named_offsets(eos_rows, named)
    return counts, examples, named, stats


def _anomaly_rows(rows) -> list[dict]:
    """A finder's ANOMALY_SCHEMA tuples as dicts."""
    return [dict(zip(ANOMALY_SCHEMA.names, row)) for row in rows]


def _timed(progress, label: str, finder, count=len):
    """Runs a finder and reports how many instances it found (`count` of
    what it returns) and how long it took."""
    started = time.monotonic()
    found = finder()
    progress(f"  {label}: {count(found)} instance(s) in {time.monotonic() - started:.1f}s")
    return found


def _other_lane(t: Tables, max_examples: int, progress) -> tuple[tuple, dict]:
    """The finders besides the cycle search, then the stats."""
    found_txn = _timed(progress, "transactions", lambda: _anomaly_rows(txn.torn_transactions(t) + txn.zombie_writes(t)))
    found_stuck = _timed(progress, "stuck-lso", lambda: _anomaly_rows(liveness.stuck_reads(t)))
    found_eos = _timed(
        progress,
        "eos",
        lambda: _frame_counts_and_examples(eos.find(t), max_examples) if eos.applies(t) else ({}, {}, []),
        count=lambda found: sum(found[0].values()),
    )
    return (found_txn, found_stuck, found_eos), compute_stats(t)


def _merge(counts: dict, examples: dict, named: dict, rows: list[dict], max_examples: int) -> None:
    for row in rows:
        counts[row["name"]] = counts.get(row["name"], 0) + 1
        examples.setdefault(row["name"], []).append(row)
    for name in {row["name"] for row in rows}:
        examples[name] = sorted(examples[name], key=example_key)[: max(max_examples, 1)]
    named_offsets(rows, named)


def check_tables(
    t: Tables, max_examples: int = 10, elle_jar: str | None = None, progress=print, load_seconds: float | None = None
) -> dict:
    """The whole results.json dict for loaded tables (writes nothing).
    `load_seconds`: how long loading them took, counted in the check's time."""
    started = time.monotonic()
    counts, examples, named, stats = find_anomalies(t, max_examples, progress)
    windows = nemesis_windows.windows(passes.nemesis_ops(t))
    anomalies = {}
    for name in sorted(counts):
        why = permissions.why_allowed(name, t.test)
        anomalies[name] = {
            "count": counts[name],
            "allowed": why is not None,
            "why_allowed": why,
            "description": permissions.describe(name),
            "examples": [_example(row, windows) for row in examples.get(name, [])][:max_examples],
        }
    torn = t.metrics["torn_tail"] > 0
    cut_short = t.metrics["cut_short"] > 0 or torn
    result = {"verdict": None, "anomalies": anomalies, "cut_short": cut_short}
    result["verdict"], result["verdict_reasons"] = verdict(
        anomalies, cut_short, permissions.drain_complete(t.test), stats["ops"] == 0, torn
    )
    result["config"] = permissions.config(t.test)
    result["stats"] = stats
    result["nemesis"] = nemesis_windows.public(windows)
    result["partitions"] = partitions(t, named) if named else {}
    result["elle"] = elle_section(t, t.directory, elle_jar)
    # The load is most of a large check: a time without it said "checked in
    # 97 s" of a check that took 160 s (1M long transactions).
    seconds = time.monotonic() - started + (load_seconds or 0.0)
    events = stats["events"]
    result["checker"] = {
        "engine": "spark",
        "seconds": round(seconds, 3),
        "events_per_s": round(events / seconds, 1) if seconds > 0 else None,
        "spark_master": t.spark.sparkContext.master,
    }
    if load_seconds is not None:
        result["checker"]["load_seconds"] = round(load_seconds, 3)
    return result


def check_dir(path, spark=None, max_examples: int = 10, elle_jar: str | None = None, progress=print) -> dict:
    """Checks a run directory and writes DIR/results.json; returns the results.

    Bad input raises GregorError before anything is written, and so does a
    check that runs out of memory: one line naming spark.driver.memory and a
    value that would do. Everything the
    check kept in Spark is released before it returns, so a long-lived
    session (the test suite, a service) stays flat.
    """
    directory = Path(path)
    history_bytes = history_path(directory).stat().st_size
    spark = spark or get_spark(history_bytes=history_bytes)
    progress(f"checking {directory} on Spark {spark.sparkContext.master}")
    passes.prestart_python_workers(spark)
    # The load is the one long silent step (about a minute for 10M events).
    progress(f"  loading {history_bytes / 2**20:,.1f} MiB of history")
    heap = driver_memory(spark)
    try:
        with session_conf(spark, "spark.sql.autoBroadcastJoinThreshold", "-1"):  # also in a session made elsewhere
            result = _load_and_check(directory, spark, max_examples, elle_jar, progress)
    except Exception as error:
        short = out_of_memory(error, heap, history_bytes)
        if short is None:
            raise
        raise short from error
    write_json(directory / "results.json", result, default=str)
    return result


def _load_and_check(directory: Path, spark, max_examples: int, elle_jar: str | None, progress) -> dict:
    started = time.monotonic()
    t = load(directory, spark)
    load_seconds = time.monotonic() - started
    progress(f"  load: {t.metrics['events']} events in {load_seconds:.1f}s")
    if t.metrics["torn_tail"]:
        progress(
            f"  the last line ({t.metrics['torn_tail']} bytes, no newline) was cut off mid-write"
            " by a crash and is left out"
        )
    try:
        return check_tables(
            t, max_examples=max_examples, elle_jar=elle_jar, progress=progress, load_seconds=load_seconds
        )
    finally:
        t.release()
