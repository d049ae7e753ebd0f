"""Where the checker's load spends its time, stage by stage, on one history.

    .venv/bin/python benchmarks/bench_load_stages.py [--events 1000000] [--repeats 2] [--fast-only]

Generates a history like bench_checkers.py's (or takes --run DIR), then times,
in one warm Spark session, each stage of checkers/load.py written to Spark's
no-op sink (every column computed, nothing stored): the parse with line
numbers, the pairing of invokes and completions (a window per process), the
rows (one per op, mop and marker), then the whole SQL load (the shuffle by
route, the persist and the metrics), and the whole fast load
(checkers/fastload.py) that builds the same table, with its first pass
(the summaries) and both passes (the rows) timed on their own, each both
ways: with the first pass's light parse and a second full parse, and (as
the load does in local mode) with one full parse that pass 2 reads back
from pass 1's scratch files. The first
repeat includes the JIT's warm-up; the last one is the figure to compare. The gap between the parse
and the whole load is what a one-shuffle load would save.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_checkers import generate  # noqa: E402

from checkers import fastload  # noqa: E402
from checkers import load as stages  # noqa: E402
from checkers.spark import get_spark  # noqa: E402


def _noop(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _summaries(spark, history: Path, keys: list[int], cached: bool) -> None:
    with fastload.parse_cache(spark) if cached else contextlib.nullcontext() as cache:
        fastload.partition_summaries(fastload.file_input(spark, history), np.array(sorted(keys), dtype=np.int64), cache)


def _rows(spark, history: Path, keys: list[int], cached: bool) -> None:
    with fastload.parse_cache(spark) if cached else contextlib.nullcontext() as cache:
        _noop(fastload.fast_rows(spark, history, keys, cache))


def measure(spark, run: Path, fast_only: bool = False) -> dict[str, float]:
    history = run / "history.jsonl"
    keys = stages.known_keys(stages.read_test(run))
    sql = {
        "parse": lambda: _noop(stages.numbered_events(spark, history)),
        "parse + pairing": lambda: _noop(stages.paired_events(stages.numbered_events(spark, history))),
        "parse + pairing + rows": lambda: _noop(
            stages._rows(stages.paired_events(stages.numbered_events(spark, history)), keys)
        ),
        "whole SQL load": lambda: stages.load(run, spark, fast=False).release(),
    }
    steps = {} if fast_only else sql
    steps.update(
        {
            "fast pass 1, light parse": lambda: _summaries(spark, history, keys, False),
            "fast passes 1 + 2, parse twice": lambda: _rows(spark, history, keys, False),
            "fast pass 1, parse kept": lambda: _summaries(spark, history, keys, True),
            "fast passes 1 + 2, parse once": lambda: _rows(spark, history, keys, True),
            "whole fast load": lambda: stages.load(run, spark).release(),
        }
    )
    out = {}
    for name, step in steps.items():
        started = time.monotonic()
        step()
        out[name] = time.monotonic() - started
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--run", type=Path, help="an existing run directory instead of a generated one")
    parser.add_argument("--repeats", type=int, default=2, help="repeats in the one session (default 2)")
    parser.add_argument("--fast-only", action="store_true", help="time only the fast load's stages")
    args = parser.parse_args(argv)
    scratch = None
    if args.run is None:
        scratch = Path(tempfile.mkdtemp(prefix="bench-load-stages-"))
        run = scratch / "run"
        print(f"generating {args.events:,} events ...", flush=True)
        events = generate(run, args.events)["events"]
    else:
        run = args.run
        events = sum(1 for _ in open(run / "history.jsonl"))
    try:
        spark = get_spark()
        for repeat in range(1, args.repeats + 1):
            figures = measure(spark, run, args.fast_only)
            print(f"repeat {repeat}, {events:,} events:")
            for name, seconds in figures.items():
                print(f"  {name:26} {seconds:6.1f}s  {events / seconds:10,.0f} events/s", flush=True)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
