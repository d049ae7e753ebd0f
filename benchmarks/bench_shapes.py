"""The check at its default settings on the history shapes users produce (benchmarks/history_shapes.py).

For each shape and size: generates the history (or reuses the one in
--dir), then checks it in a new process, as `gregor check` would: a new
Spark session with Gregor's defaults and no setting of the benchmark's own
(in particular no memory setting). In that same session Spark's floor is
timed right after (a parse plus one shuffle, as benchmarks/bench_checkers.py
times it), so the check's share of the floor compares two measurements of
one JVM. Prints per run: events, seconds, events/s, the floor's events/s,
the share, peak memory (the process, its Spark JVM and Python workers) and
whether every planted anomaly was found; a table at the end.

    .venv/bin/python benchmarks/bench_shapes.py --events 1000000 --dir /tmp/shapes
    .venv/bin/python benchmarks/bench_shapes.py --shape txn --shape eos --events 10000000 --dir /tmp/shapes

Goals (issue 42): every shape passes at 1M and 10M with its planted
anomalies found, at 10M at least 40% of the floor, peak memory under 2.5 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import history_shapes  # noqa: E402

# The child: one check in a new session at the defaults, then the floor in the same session.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from bench_checkers import PeakMemory, SHUFFLED, found, spark_floor
from checkers.check import check_dir
from checkers.load import history_path
from checkers.spark import get_spark

directory, planted = Path(sys.argv[1]), json.loads(sys.argv[3])
events = planted.pop("__events__")
with PeakMemory() as memory:
    started = time.monotonic()
    spark = get_spark(history_bytes=history_path(directory).stat().st_size)
    spark_s = time.monotonic() - started
    started = time.monotonic()
    try:
        results = check_dir(directory, spark, progress=lambda m: print(m, file=sys.stderr, flush=True))
        error = None
    except Exception as exc:
        results, error = None, type(exc).__name__ + ": " + (str(exc).strip().splitlines() or [""])[0][:300]
    seconds = time.monotonic() - started
floor = spark_floor(spark, directory / "history.jsonl", events, parse_alone=False)[SHUFFLED] if results else None
row = {"seconds": seconds, "spark_start_s": spark_s, "floor": floor, "error": error,
       "peak_mib": memory.peak_total / 1024, "jvm_mib": memory.peak_jvm_only / 1024,
       "workers_mib": memory.peak_workers / 1024, "driver_mib": memory.peak_driver / 1024}
if results:
    row["found"] = {name: found(results, name, where) for name, where in planted.items()}
    row["anomalies"] = {n: e["count"] for n, e in results["anomalies"].items()}
    row["verdict"] = results["verdict"]
print("RESULT " + json.dumps(row), flush=True)
"""


def prepared(shape: str, events: int, root: Path) -> tuple[Path, dict]:
    """The run directory of this shape and size under `root`, generated unless already there."""
    directory = root / f"{shape}-{events}"
    meta = directory / "planted.json"
    if meta.is_file() and (directory / "history.jsonl").is_file():
        return directory, json.loads(meta.read_text())
    started = time.monotonic()
    made = history_shapes.generate(shape, directory, events)
    meta.write_text(json.dumps(made))
    size = (directory / "history.jsonl").stat().st_size / 1e6
    print(f"generated {shape}: {made['events']:,} events ({size:,.0f} MB) in {time.monotonic() - started:.0f}s")
    return directory, made


def check(directory: Path, made: dict) -> dict:
    planted = dict(made["planted"], __events__=made["events"])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(directory), str(Path(__file__).resolve().parent), json.dumps(planted)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    for line in done.stderr.splitlines():
        if line.startswith("  ") or line.startswith("checking"):
            print("   " + line, flush=True)
    rows = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not rows:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"the check's process exited {done.returncode}: {tail[:300]}", "seconds": None}
    return rows[0]


def line(shape: str, events: int, row: dict) -> str:
    if row.get("error"):
        return f"{shape:<9} {events:>11,}  FAILED: {row['error']}"
    rate = events / row["seconds"]
    share = f"{rate / row['floor']:.0%}" if row.get("floor") else "-"
    floor = f"{row['floor']:,.0f}" if row.get("floor") else "-"
    missed = [name for name, ok in row["found"].items() if not ok]
    return (
        f"{shape:<9} {events:>11,} {row['seconds']:>8.1f} {rate:>10,.0f} {floor:>11} {share:>6} "
        f"{row['peak_mib']:>9,.0f} {row['jvm_mib']:>8,.0f} {row['workers_mib']:>8,.0f}  "
        + ("all found" if not missed else "MISSED " + ",".join(missed))
    )


HEADER = (
    f"{'shape':<9} {'events':>11} {'check s':>8} {'events/s':>10} {'floor ev/s':>11} {'share':>6} "
    f"{'peak MiB':>9} {'JVM MiB':>8} {'workers':>8}  planted"
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", choices=sorted(history_shapes.SHAPES), help="repeatable")
    parser.add_argument("--events", action="append", type=int, help="repeatable (default 1,000,000)")
    parser.add_argument("--dir", type=Path, required=True, help="where histories are generated and kept")
    args = parser.parse_args(argv)
    shapes = args.shape or list(history_shapes.SHAPES)
    rows = []
    for events in args.events or [1_000_000]:
        for shape in shapes:
            directory, made = prepared(shape, events, args.dir)
            print(f"checking {shape} ({made['events']:,} events) at the default settings", flush=True)
            row = check(directory, made)
            rows.append((shape, made["events"], row))
            print(HEADER + "\n" + line(shape, made["events"], row), flush=True)
            if row.get("anomalies") is not None:
                print(f"   anomalies: {row['anomalies']}; verdict {row['verdict']}", flush=True)
    print("\nsummary (2 cores; peak = the check's process + its Spark JVM + Python workers)")
    print(HEADER)
    for shape, events, row in rows:
        print(line(shape, events, row))
    return 0 if all(not r.get("error") and all(r["found"].values()) for _s, _e, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
