"""Runs two checkouts of the checker on the same histories and prints every difference.

The old checker and the new one each check every run directory given (a
directory holding history.jsonl and test.json, found recursively under each
argument), one Spark session per side, in a child process whose import path
is that checkout. What is compared: the verdict, each anomaly's count,
`allowed` and `why_allowed`, stats ops/ok/info/fail, and the one-line error
of a bad history. Examples are not compared (which instances make the
first few may differ in order), unless `--full`: then the whole
results.json is, apart from its `checker` timings (for a change that must
leave the results identical).

    .venv/bin/python benchmarks/diff_checkers.py --old /work/wt/checker-old DIR...

Neither side writes into the run directories: each check runs on a scratch
copy (the history is linked, not copied). `--save DIR` keeps each side's
summaries (DIR/old.jsonl, DIR/new.jsonl); `--old-results FILE` reuses such a
file instead of running the old checker again (the old checker is slow), and
compares only the runs it has. Exit status 0 when no difference
was found, 1 otherwise; the report lists each run and what differs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The child: checks each run dir on one Spark session and writes one JSON line per run.
CHILD = r"""
import json, sys, time, traceback
from pathlib import Path
from checkers.check import check_dir
from checkers.spark import get_spark
spark = get_spark()
full = sys.argv[2] == "full"
with open(sys.argv[1], "w") as out:
    for line in sys.stdin:
        name, scratch = json.loads(line)
        started = time.monotonic()
        try:
            result = check_dir(scratch, spark, max_examples=10 if full else 1, progress=lambda _m: None)
            row = {"run": name, "seconds": time.monotonic() - started, "verdict": result["verdict"],
                   "anomalies": {n: [e["count"], e["allowed"], e.get("why_allowed")]
                                 for n, e in result["anomalies"].items()},
                   "stats": {k: result.get("stats", {}).get(k) for k in ("ops", "ok", "info", "fail")}}
            if full:
                kept = {k: v for k, v in result.items() if k != "checker"}
                row["results"] = json.loads(json.dumps(kept, default=str))
        except Exception as error:  # a bad history: both sides must refuse it alike
            row = {"run": name, "seconds": time.monotonic() - started,
                   "error": type(error).__name__ + ": " + str(error).replace(scratch, "RUN").splitlines()[0][:200]}
        out.write(json.dumps(row) + "\n")
        out.flush()
"""


def run_dirs(roots: list[Path]) -> list[Path]:
    found = []
    for root in roots:
        if (root / "history.jsonl").is_file() and (root / "test.json").is_file():
            found.append(root)
        else:
            found.extend(sorted(p.parent for p in root.rglob("history.jsonl") if (p.parent / "test.json").is_file()))
    return found


def scratch_copy(run: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    (into / "history.jsonl").symlink_to((run / "history.jsonl").resolve())
    shutil.copy(run / "test.json", into / "test.json")
    return into


def check_all(checkout: Path, runs: list[Path], scratch: Path, python: str, full: bool = False) -> dict:
    """Checks every run with the checker of `checkout`; run name -> summary."""
    jobs = [(str(run), str(scratch_copy(run, scratch / str(i)))) for i, run in enumerate(runs)]
    out = scratch / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(checkout))
    stdin = "".join(json.dumps(job) + "\n" for job in jobs)
    subprocess.run(
        [python, "-c", CHILD, str(out), "full" if full else "summary"],
        input=stdin,
        text=True,
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return {row["run"]: row for row in rows}


def differences(old: dict | None, new: dict | None) -> list[str]:
    if old is None or new is None:
        return [f"{'old' if old is None else 'new'} checker produced no result"]
    if "error" in old or "error" in new:
        if old.get("error") != new.get("error"):
            return [f"error: old {old.get('error')!r}, new {new.get('error')!r}"]
        return []
    out = []
    if old["verdict"] != new["verdict"]:
        out.append(f"verdict: old {old['verdict']}, new {new['verdict']}")
    for name in sorted(set(old["anomalies"]) | set(new["anomalies"])):
        a, b = old["anomalies"].get(name), new["anomalies"].get(name)
        if a != b:
            out.append(f"{name}: old {_entry(a)}, new {_entry(b)}")
    if old["stats"] != new["stats"]:
        out.append(f"stats: old {old['stats']}, new {new['stats']}")
    if "results" in old and "results" in new:
        for section in sorted(set(old["results"]) | set(new["results"])):
            if old["results"].get(section) != new["results"].get(section):
                out.append(f"results.json `{section}` differs")
    return out


def _entry(entry) -> str:
    if entry is None:
        return "absent"
    count, allowed, why = entry
    return f"count {count} ({'allowed: ' + str(why) if allowed else 'bad'})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="run directories, or folders to search for them")
    parser.add_argument("--old", type=Path, required=True, help="checkout of the old checker")
    parser.add_argument("--new", type=Path, default=REPO, help="checkout of the new checker (default: this one)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with pyspark (default: this one)")
    parser.add_argument("--save", type=Path, help="folder to keep each side's summaries in (old.jsonl, new.jsonl)")
    parser.add_argument("--old-results", type=Path, help="old side's summaries from an earlier --save (not rerun)")
    parser.add_argument(
        "--full", action="store_true", help="compare the whole results.json (but its `checker` timings), examples too"
    )
    args = parser.parse_args(argv)
    runs = run_dirs(args.dirs)
    results = {}
    if args.old_results:
        results["old"] = {row["run"]: row for row in map(json.loads, args.old_results.read_text().splitlines())}
        skipped = [run for run in runs if str(run) not in results["old"]]
        runs = [run for run in runs if str(run) in results["old"]]
        print(f"old: {len(runs)} runs from {args.old_results}; {len(skipped)} runs it lacks are not compared")
    if not runs:
        print("no run directory (history.jsonl + test.json) under the given paths", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="diff-checkers-"))
    try:
        for side, checkout in (("old", args.old), ("new", args.new)):
            if side in results:
                continue
            results[side] = check_all(checkout.resolve(), runs, scratch / side, args.python, args.full)
            seconds = sum(r["seconds"] for r in results[side].values())
            print(
                f"{side}: {checkout.resolve()}: {len(results[side])} of {len(runs)} runs checked, "
                f"{seconds:.1f}s checking in all",
                flush=True,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for side, rows in results.items():
            (args.save / f"{side}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
    differing = 0
    for run in runs:
        old, new = results["old"].get(str(run)), results["new"].get(str(run))
        found = differences(old, new)
        summary = (new or old or {}).get("verdict") or (new or old or {}).get("error", "?")
        timing = " ".join(f"{side} {r['seconds']:.1f}s" for side, r in (("old", old), ("new", new)) if r)
        print(f"{'DIFF' if found else 'same'} {run}  [{summary}; {timing}]")
        for line in found:
            print(f"     {line}")
        differing += bool(found)
    print(f"{len(runs)} runs, {differing} with differences")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
