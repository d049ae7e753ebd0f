"""Detection power of the guarantee catalogue, per claim.

Runs `gregor scenarios` (K runs per side, fixed seeds) and prints per
claim: the detection rate of the unsafe side (runs in which an expected
anomaly appeared), the median time to detect (seconds from the run's start
to its first expected anomaly), and the false alarms of the safe side
(runs with a bad anomaly), and per side the runs whose final drain found a
log truncated below an acknowledged offset. Figures, not a pass/fail test; the goal is each
unsafe side detected in at least 8 of 10 runs of at most 60 s and each safe
side free of bad anomalies in 10 of 10.

    sudo .venv/bin/python benchmarks/bench_scenarios.py --runs 10 [--only acks,...] [--lab gscen]
    .venv/bin/python benchmarks/bench_scenarios.py --from store/scenarios/<time>   # figures of a finished catalogue
    .venv/bin/python benchmarks/bench_scenarios.py --from store/scenarios/*        # runs of several, together

With several --from directories, a claim side's runs count together when
they ran with the same settings as that side's newest runs; the others are
left out and listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.controller import catalogue  # noqa: E402


def table(summary: dict) -> str:
    lines = [
        f"{'claim':<20} {'detected':>9} {'median s':>9} {'false alarms':>13} {'errors':>7} {'truncated':>10}"
        "  anomalies (unsafe / safe)"
    ]
    for claim in summary["claims"]:
        unsafe, safe = claim["figures"]["unsafe"], claim["figures"]["safe"]
        truncated = f"{unsafe['truncated']}/{safe['truncated']}"  # runs whose drain found a log truncated
        detected = f"{unsafe['hits']}/{unsafe['completed']}"
        median = "-" if unsafe["median_first_s"] is None else f"{unsafe['median_first_s']:.1f}"
        alarms = f"{safe['hits']}/{safe['completed']}"
        errors = unsafe["errors"] + safe["errors"]
        names = (
            (",".join(f"{n}:{a['count']}" for n, a in unsafe["anomalies"].items()) or "-")
            + " / "
            + (
                ",".join(f"{n}:{a['count']}{'' if a['allowed'] else '(bad)'}" for n, a in safe["anomalies"].items())
                or "-"
            )
        )
        lines.append(f"{claim['name']:<20} {detected:>9} {median:>9} {alarms:>13} {errors:>7} {truncated:>10}  {names}")
    return "\n".join(lines)


def _summary(directory: Path) -> dict:
    path = directory / "scenarios.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"{path}: not a finished catalogue's summary ({error}); give store/scenarios/<time>") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument("--only", default=None, help="comma list of claim names")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--lab", default="gscen")
    parser.add_argument("--store", default="store")
    parser.add_argument(
        "--from",
        dest="sources",
        nargs="+",
        default=None,
        metavar="DIR",
        help="print the figures of finished catalogue directories instead of running one "
        "(several: their runs together)",
    )
    args = parser.parse_args(argv)
    if args.sources:
        summary, left_out = catalogue.merge([_summary(Path(source)) for source in args.sources])
        for line in left_out:
            print(f"left out: {line}")
    else:
        from harness.controller.scenarios import Catalogue
        from harness.lab import lab_name

        claims = catalogue.select(catalogue.load(), args.only)
        summary = Catalogue(
            claims, runs=args.runs, seed=args.seed, time_limit=args.time_limit, store=args.store, lab=lab_name(args.lab)
        ).run()
    if summary.get("merged_from"):
        print(
            f"runs of {len(summary['merged_from'])} catalogue(s) from {summary['started']}, "
            f"{summary['backend']} backend, {summary['system']} "
            f"{summary['version'] or '(its default version; claims may pin their own)'}"
        )
    else:
        print(
            f"{summary['runs_per_side']} run(s) per side of {summary['time_limit_s']:g} s, seeds from "
            f"{summary['seed']}, {summary['backend']} backend"
        )
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
