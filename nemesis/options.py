"""The nemesis options of `gregor run`.

args.nemesis -> list of fault names ([] for none), args.nemesis_interval ->
seconds, args.nemesis_targets -> list of target names, args.nemesis_shape ->
a fixed partition shape or None, args.nemesis_hold -> a fixed hold or None,
args.wire_rule -> the wire rules as given; they map one to one onto
NemesisRunner(faults=, interval_s=, targets=, shape=, hold_s=, wire_rules=).
NEMESIS_OPTIONS declares them; `gregor run` composes them into its run
configuration (harness/controller/run_config.py).
"""

from __future__ import annotations

import argparse

from ground.errors import GregorError
from ground.options import REPEAT, Option, add_options
from nemesis.schedule import CLIENT_SHAPES, DEFAULT_TARGETS, FAULTS, NODE_SHAPES, parse_faults, parse_targets
from nemesis.wire import parse_rule


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


def _wire_rule(text: str) -> str:
    try:
        parse_rule(text)
    except GregorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text.strip()


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes seconds, e.g. 10, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


GROUP = "nemesis (faults)"
NEMESIS_OPTIONS = (
    Option(
        "--nemesis",
        type=_faults,
        default=(),
        metavar="FAULTS",
        group=GROUP,
        help=f"comma list of {', '.join(FAULTS)}, or none (default: none)",
    ),
    Option(
        "--nemesis-interval",
        type=_interval,
        default=10.0,
        metavar="S",
        group=GROUP,
        help="seconds of quiet between faults, and how long a fault is held (each drawn from 0.5-1.5 x S; default 10)",
    ),
    Option(
        "--nemesis-targets",
        type=_targets,
        default=tuple(DEFAULT_TARGETS),
        metavar="TARGETS",
        group=GROUP,
        help="comma list of "
        + ", ".join(DEFAULT_TARGETS)
        + ", or leader:KEY, node:NAME, txn:ID, group:ID, client:ROLE "
        "(default: all of them)",
    ),
    Option(
        "--nemesis-shape",
        default=None,
        metavar="SHAPE",
        choices=NODE_SHAPES + CLIENT_SHAPES,
        group=GROUP,
        help="every partition has this shape ("
        + ", ".join(NODE_SHAPES + CLIENT_SHAPES)
        + "; client-deaf: the client's requests arrive, the answers vanish); "
        "default: drawn per target",
    ),
    Option(
        "--nemesis-hold",
        type=_interval,
        default=None,
        metavar="S",
        group=GROUP,
        help="hold every fault exactly S seconds (default: drawn from 0.5-1.5 x the interval)",
    ),
    Option(
        "--wire-rule",
        type=_wire_rule,
        default=(),
        kind=REPEAT,
        metavar="RULE",
        group=GROUP,
        help="a rule a wire fault switches on for one client's requests, or for the requests the brokers a "
        "node target names send other brokers (Apache Kafka, namespaces backend) (repeatable; each fault draws one), "
        "ACTION[:KEY=VALUE]...: delay|hold|drop-response|duplicate, keys api, ms, on, txn, producer, dest, "
        "count, after, for; e.g. delay:api=EndTxn:ms=3000:count=1 (docs/WIRE.md)",
    ),
)


def add_nemesis_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, NEMESIS_OPTIONS)
