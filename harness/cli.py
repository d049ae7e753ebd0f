"""The `gregor` command.

Each subcommand lives in the module that does its job; this file only wires
them together, so that adding a command never touches another one's code.
Every module listed here exposes ``register(subparsers)``, which adds its
parsers and sets ``func`` on them to a callable taking the parsed args and
returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ground.errors import GregorError

COMMAND_MODULES = (
    "harness.controller.lab_cli",  # lab up/status/down, kafka install, demo
    "harness.controller.run_cli",  # run
    "harness.controller.scenarios",  # scenarios: the guarantee catalogue
    "harness.controller.evidence_cli",  # evidence: the brokers' segments behind a run's anomalies
    "checkers.cli",  # check, export, import
    "reports.cli",  # report
)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments get one line that says what to fix (exit 2), like every
    other bad input, instead of argparse's usage block."""

    def error(self, message: str):
        self.exit(2, f"gregor: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gregor",
        description="Fault-injection tests for Kafka-compatible systems.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except GregorError as error:
        print(f"gregor: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gregor: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
