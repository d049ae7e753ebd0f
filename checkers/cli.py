"""`gregor check DIR`, plus the import/export commands of the other checker modules.

Exit codes of `check`: 0 valid, 1 invalid, 3 unknown; 2 (from harness.cli)
for bad input, printed as one line.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from checkers.check import check_dir
from checkers.load import history_path, read_test
from checkers.spark import add_spark_arguments, get_spark, parse_conf
from ground.errors import GregorError

EXIT_CODES = {"valid": 0, "invalid": 1, "unknown": 3}

# Modules that may add their own subcommands through register_* functions.
EXTRA_COMMAND_MODULES = ("checkers.jepsen_import", "checkers.edn", "checkers.elle")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a run's history and write results.json",
        description="Reads DIR/history.jsonl and DIR/test.json, finds every anomaly of docs/ANOMALIES.md "
        "on Spark and writes DIR/results.json.",
        epilog="Exit status: 0 valid, 1 invalid, 3 unknown (cut short, drain incomplete or empty), 2 bad input.",
    )
    parser.add_argument("dir", metavar="DIR", help="run directory holding history.jsonl and test.json")
    add_spark_arguments(parser)
    parser.add_argument("--examples", type=int, default=10, metavar="N", help="examples kept per anomaly (default 10)")
    parser.add_argument(
        "--elle-jar",
        default=os.environ.get("GREGOR_ELLE_JAR"),
        metavar="PATH",
        help="Elle command-line jar to run as well (default $GREGOR_ELLE_JAR)",
    )
    parser.set_defaults(func=run_check)
    for name in EXTRA_COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name == name:
                continue
            raise
        for attr in sorted(dir(module)):
            if attr.startswith("register_") and callable(getattr(module, attr)):
                getattr(module, attr)(subparsers)


def run_check(args) -> int:
    if args.examples < 1:
        raise GregorError("--examples must be at least 1")
    if args.elle_jar and not os.path.isfile(args.elle_jar):
        raise GregorError(f"--elle-jar {args.elle_jar}: no such file")
    conf = parse_conf(args.spark_conf)
    _check_run_files(args.dir)  # fail in a second, before a JVM starts
    spark = get_spark(args.spark_master, conf, history_bytes=history_path(args.dir).stat().st_size)
    result = check_dir(
        args.dir,
        spark=spark,
        max_examples=args.examples,
        elle_jar=args.elle_jar,
        progress=lambda line: print(line, flush=True),
    )
    print(summary(result))
    print(f"results: {os.path.join(args.dir, 'results.json')}")
    return EXIT_CODES[result["verdict"]]


def _check_run_files(directory: str) -> None:
    path = Path(directory)
    if not path.is_dir():
        raise GregorError(f"{directory}: no such run directory")
    if not (path / "history.jsonl").is_file():
        raise GregorError(
            f"{path / 'history.jsonl'} not found: `gregor check` needs a run directory holding history.jsonl"
        )
    read_test(path)


def summary(result: dict) -> str:
    """A few lines for a human: verdict, then each anomaly with its count and permission."""
    lines = [
        f"verdict: {result['verdict']}"
        + (f" ({'; '.join(result.get('verdict_reasons') or [])})" if result.get("verdict_reasons") else "")
    ]
    for name, entry in sorted(result["anomalies"].items()):
        permission = f"permitted because {entry['why_allowed']}" if entry["allowed"] else "bad"
        lines.append(f"  {name}: {entry['count']}, {permission}")
    stats = result.get("stats", {})
    lines.append(
        f"ops: {stats.get('ops', 0)} (ok {stats.get('ok', 0)}, info {stats.get('info', 0)}, "
        f"fail {stats.get('fail', 0)}); checked in {result['checker']['seconds']}s"
    )
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)
