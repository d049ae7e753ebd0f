"""The nemesis options of `gregor run`.

args.nemesis -> list of fault names ([] for none), args.nemesis_interval ->
seconds, args.nemesis_targets -> list of target names; they map one to one
onto NemesisRunner(faults=, interval_s=, targets=).
"""

from __future__ import annotations

import argparse

from harness.errors import GregorError
from nemesis.schedule import DEFAULT_TARGETS, FAULTS, parse_faults, parse_targets


def _faults(text: str) -> list[str]:
    try:
        return parse_faults(text)
    except GregorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _targets(text: str) -> list[str]:
    try:
        return parse_targets(text)
    except GregorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nemesis-interval takes seconds, e.g. 10, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--nemesis-interval must be positive, got {text}")
    return value


def add_nemesis_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("nemesis (faults)")
    group.add_argument("--nemesis", type=_faults, default=[], metavar="FAULTS",
                       help=f"comma list of {', '.join(FAULTS)}, or none (default: none)")
    group.add_argument("--nemesis-interval", type=_interval, default=10.0, metavar="S",
                       help="seconds of quiet between faults, and how long a fault is held "
                            "(each drawn from 0.5-1.5 x S; default 10)")
    group.add_argument("--nemesis-targets", type=_targets, default=list(DEFAULT_TARGETS),
                       metavar="TARGETS",
                       help="comma list of " + ", ".join(DEFAULT_TARGETS)
                            + ", or leader:KEY, node:NAME, txn:ID, group:ID, client:ROLE "
                            "(default: all of them)")
