"""The options that name a lab and what it runs: --lab, --backend, --system, --version.

Shared by `gregor lab`, `gregor run` and `gregor demo`, so the three can never
disagree on a default.
"""

from __future__ import annotations

import argparse

from harness import registry


def _choice(table: dict, what: str):
    def check(text: str) -> str:
        if text not in table:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; choose one of {', '.join(table)}")
        return text
    return check


def add_lab_arguments(parser: argparse.ArgumentParser, system: bool = True) -> None:
    parser.add_argument("--lab", default=None, metavar="NAME",
                        help="lab name (default $GREGOR_LAB, else one per backend: "
                             + ", ".join(f"{b} {n}" for b, n in registry.DEFAULT_LAB.items() if b in registry.BACKENDS)
                             + "); labs with different names coexist")
    parser.add_argument("--backend", default="local", type=_choice(registry.BACKENDS, "backend"),
                        metavar="|".join(registry.BACKENDS),
                        help="where the nodes live: local network namespaces (default, no daemon, no VM) "
                             "or Docker containers")
    if system:
        parser.add_argument("--system", default="kafka", type=_choice(registry.SYSTEMS, "system"),
                            metavar="|".join(registry.SYSTEMS), help="what runs on the nodes (default kafka)")
        parser.add_argument("--version", default=None, metavar="V",
                            help="the system's version (default: the system's own default)")
