"""How close a check can come to Spark's floor: the floor, issue 13's
sketch of a checker with its passes left empty, and the real check, timed
alternating in one warm session.

The sketch is the pipeline issue 13 proposes, minus every anomaly: parse
once with the explicit schema, flatten to one row per mop, store the rows
partitioned by key and sorted by offset (one shuffle), read every row in a
Python pass per key, shuffle the op rows by process and read them in a
Python pass per process. Each pass only counts its rows. No check built
on that shape can be faster than it, so the sketch's share of the floor
is the most a check of that shape can reach, and the check's time above
the sketch is what all the checking itself costs.

    .venv/bin/python benchmarks/bench_sketch.py
    .venv/bin/python benchmarks/bench_sketch.py --events 100000 --rounds 7

Histories come from bench_checkers.py's generator (or --dir, a run
directory). Medians are printed per size; 2 shared cores wander by 10 to
15%, so only figures from one session compare.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_checkers import SHUFFLED, generate, spark_floor  # noqa: E402

# The event's fields a per-process pass reads (the mops' fields go to the per-key pass).
OP_FIELDS = ("index", "time", "process", "type", "f", "error", "txn_id", "producer_id", "epoch")


def empty_sketch(spark, history: Path) -> dict:
    """Runs the sketch once; returns the rows each pass received (ops, mop rows)."""
    from pyspark.sql import functions as F

    from checkers.load import EVENT_SCHEMA, _partitions, free_rows, storage_level, stored_rows

    def count_rows(batches):
        """A pass that does nothing but receive its partition in Python (defined
        here so that the workers get it by value: they cannot import this file)."""
        import pyarrow as pa

        rows = 0
        for batch in batches:
            rows += batch.num_rows
        yield pa.RecordBatch.from_pydict({"n": [rows]})

    partitions = _partitions(spark, history)
    parsed = spark.read.text(str(history)).select(F.from_json("value", EVENT_SCHEMA).alias("e")).select("e.*")
    flat = parsed.select(*OP_FIELDS, F.posexplode_outer("mops").alias("mop_index", "m")).select(
        *OP_FIELDS, "mop_index", F.col("m.f").alias("mf"), "m.key", "m.value", "m.offset", "m.poll"
    )
    table = stored_rows(
        flat.repartition(partitions, "key").sortWithinPartitions("key", "offset", "index"), storage_level(history)
    )
    try:
        mop_rows = sum(r["n"] for r in table.mapInArrow(count_rows, "n long").collect())
        ops = table.where(F.col("mop_index").isNull() | (F.col("mop_index") == 0)).select(*OP_FIELDS)
        op_rows = sum(
            r["n"]
            for r in ops.repartition(partitions, "process")
            .sortWithinPartitions("process", "index")
            .mapInArrow(count_rows, "n long")
            .collect()
        )
    finally:
        free_rows(table)
    return {"ops": op_rows, "mop_rows": mop_rows}


def timed(step) -> float:
    started = time.monotonic()
    step()
    return time.monotonic() - started


def compare(spark, directory: Path, events: int, rounds: int, warmup: int) -> dict:
    """Warm-up rounds, then `rounds` of floor, empty sketch and check; medians."""
    from checkers.check import check_dir

    history = directory / "history.jsonl"

    def one_round() -> tuple[float, float, float]:
        """Seconds of the floor, the empty sketch and the check, in that order."""
        with contextlib.redirect_stdout(io.StringIO()):
            floor = events / spark_floor(spark, history, events, parse_alone=False)[SHUFFLED]
        sketch = timed(lambda: empty_sketch(spark, history))
        check = timed(lambda: check_dir(directory, spark, max_examples=50, progress=lambda _m: None))
        return floor, sketch, check

    for n in range(warmup):
        one_round()
        print(f"  warm-up round {n + 1} of {warmup} done", flush=True)
    timed_rounds = []
    for n in range(rounds):
        f, s, c = one_round()
        timed_rounds.append((f, s, c))
        print(
            f"  round {n + 1}: floor {f:.2f}s  empty sketch {s:.2f}s ({f / s:.0%} of it)  check {c:.2f}s ({f / c:.0%})",
            flush=True,
        )
    floor, sketch, check = (statistics.median(column) for column in zip(*timed_rounds))
    return {"events": events, "floor": floor, "sketch": sketch, "check": check}


def summary(rows: list[dict]) -> None:
    print("\nsummary, medians (share of the floor: floor time / time)")
    print(
        f"{'events':>12} {'floor s':>8} {'sketch s':>9} {'of floor':>9} {'check s':>8} {'of floor':>9} "
        f"{'check - sketch s':>17}"
    )
    for r in rows:
        print(
            f"{r['events']:>12,} {r['floor']:>8.2f} {r['sketch']:>9.2f} {r['floor'] / r['sketch']:>9.0%} "
            f"{r['check']:>8.2f} {r['floor'] / r['check']:>9.0%} {r['check'] - r['sketch']:>17.2f}",
            flush=True,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, action="append", help="history size (repeatable); default 100,000 and 1,000,000"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        action="append",
        default=[],
        help="an existing run directory to time instead of generating one (repeatable)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per history (default 5)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    for directory in args.dir:
        if not (directory / "history.jsonl").is_file():
            parser.error(f"{directory} has no history.jsonl: --dir takes a run directory")
    from checkers.spark import get_spark

    spark = get_spark()
    rows = []
    for directory in args.dir:
        events = sum(1 for _ in (directory / "history.jsonl").open("rb"))
        print(f"{directory}: {events:,} lines", flush=True)
        rows.append(compare(spark, directory, events, args.rounds, args.warmup))
    for wanted in args.events or ([] if args.dir else [100_000, 1_000_000]):
        directory = Path(tempfile.mkdtemp(prefix=f"bench-sketch-{wanted}-", dir=os.environ.get("TMPDIR", "/tmp")))
        try:
            events = generate(directory, wanted)["events"]
            print(f"generated {events:,} events at {directory}", flush=True)
            rows.append(compare(spark, directory, events, args.rounds, args.warmup))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
