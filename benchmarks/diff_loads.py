"""Loads runs both ways (the fast load and the SQL load) and prints every difference in the table.

    .venv/bin/python benchmarks/diff_loads.py store/scenarios [RUN_DIR ...]

Each argument is a run directory or a folder searched for them (any
directory holding history.jsonl and test.json). For each run: whether the
fast load took it (checkers/fastload.py; a history it does not take goes
to the SQL load, so both sides are then the same load), the seconds of
each load, the rows only one side has (both must be 0) and whether the
load's metrics agree. The results of a check come from this table alone,
so equal tables mean equal results. Exit status 0 when no run differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_dirs(arguments: list[str]) -> list[Path]:
    found = []
    for argument in arguments:
        path = Path(argument)
        if (path / "history.jsonl").is_file():
            found.append(path)
        else:
            found.extend(sorted(h.parent for h in path.rglob("history.jsonl") if (h.parent / "test.json").is_file()))
    return found


def compare(spark, run: Path) -> dict:
    from pyspark.sql import functions as F

    from checkers.fastload import fast_rows
    from checkers.load import history_path, known_keys, load, read_test

    taken = fast_rows(spark, history_path(run), known_keys(read_test(run))) is not None
    started = time.monotonic()
    fast = load(run, spark)
    middle = time.monotonic()
    sql = load(run, spark, fast=False)
    ended = time.monotonic()
    try:

        def rows(t):  # `_tight` is only ever counted: null and false count the same
            return t.rows.withColumn("_tight", F.coalesce("_tight", F.lit(False)))

        return {
            "taken": taken,
            "fast_s": middle - started,
            "sql_s": ended - middle,
            "rows": fast.rows.count(),
            "only_fast": rows(fast).exceptAll(rows(sql)).count(),
            "only_sql": rows(sql).exceptAll(rows(fast)).count(),
            "metrics_equal": fast.metrics == sql.metrics,
        }
    finally:
        fast.release()
        sql.release()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories, or folders holding them")
    args = parser.parse_args(argv)
    from checkers.spark import get_spark

    runs = run_dirs(args.paths)
    if not runs:
        print("no run directories (history.jsonl with test.json) under the paths given", file=sys.stderr)
        return 2
    spark = get_spark()
    differing, fast_total, sql_total = 0, 0.0, 0.0
    for number, run in enumerate(runs, start=1):
        r = compare(spark, run)
        fast_total += r["fast_s"]
        sql_total += r["sql_s"]
        same = r["only_fast"] == 0 and r["only_sql"] == 0 and r["metrics_equal"]
        differing += not same
        print(
            f"[{number}/{len(runs)}] {run}: {'same' if same else 'DIFFERENT'}; fast load "
            f"{'took it' if r['taken'] else 'stepped aside'}; {r['rows']:,} rows; "
            f"only fast {r['only_fast']}, only SQL {r['only_sql']}, metrics equal {r['metrics_equal']}; "
            f"fast {r['fast_s']:.1f}s, SQL {r['sql_s']:.1f}s",
            flush=True,
        )
    print(f"\n{len(runs)} runs, {differing} differ; loads took {fast_total:.1f}s fast, {sql_total:.1f}s SQL")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
