"""`gregor evidence DIR`: evidence/segments.json for a run whose lab is still up, then its report.

`gregor run` collects it itself; this is for a run made with --no-check (or
checked apart from `gregor run`, as the scenario catalogue does), while its
lab still holds the run's topics.
"""

from __future__ import annotations

import json
from pathlib import Path

from ground.errors import GregorError


def evidence_command(args) -> int:
    from harness.controller.evidence import collect
    from harness.lab import Lab
    from reports.cli import publish

    run_dir = Path(args.dir)
    try:
        test = json.loads((run_dir / "test.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise GregorError(
            f"{run_dir}/test.json cannot be read ({error}); give a run directory such as store/<test>/<time>"
        ) from None
    if not (run_dir / "results.json").exists():
        raise GregorError(f"{run_dir} has no results.json; run `gregor check {run_dir}` first")
    lab = Lab.attach(args.lab or test.get("lab"), backend=args.backend or test.get("backend") or "local")
    collect(lab, run_dir, progress=print)
    print(f"report: open file://{publish(run_dir, progress=print).resolve()}")
    return 0


def register(subparsers) -> None:
    command = subparsers.add_parser(
        "evidence",
        help="dump the brokers' segments of the partitions a checked run's anomalies name (its lab still up)",
    )
    command.add_argument("dir", help="run directory, e.g. store/<test>/<time>")
    command.add_argument("--lab", help="the lab (default: the one test.json names)")
    command.add_argument("--backend", help="the lab's backend (default: the one test.json names)")
    command.set_defaults(func=evidence_command)
