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


# --- what one system takes besides its version ---------------------------------------------
# flag -> the system option it sets (each system lists the options it has in OPTIONS)
SYSTEM_FLAGS = {"bootstrap": "--bootstrap", "controllers": "--controllers",
                "transaction_version": "--transaction-version", "storage": "--storage"}

# Settings Gregor sets itself and records in test.json ("client"): --client-config
# may not change them behind the record's back.
OWN_CLIENT_KEYS = ("bootstrap.servers", "acks", "enable.idempotence", "isolation.level", "transactional.id",
                   "transaction.timeout.ms", "enable.auto.commit", "group.id", "retries",
                   "max.in.flight.requests.per.connection", "max.in.flight")


def add_system_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of one system: a cluster to use, its topology, its features."""
    group = parser.add_argument_group("system options")
    group.add_argument("--bootstrap", default=None, metavar="HOST:PORT,...",
                       help="external: the bootstrap servers of a cluster Gregor did not start")
    group.add_argument("--controllers", default=None, metavar="N",
                       help="kafka: N dedicated KRaft controllers (k1..kN) beside the brokers (default 0: "
                            "every node is both)")
    group.add_argument("--transaction-version", default=None, metavar="0|1|2",
                       help="kafka: the transaction.version feature to format the cluster with "
                            "(default: the version's own, 2 from 4.0)")
    group.add_argument("--storage", default=None, metavar="postgres|memory",
                       help="tansu: PostgreSQL shared by every broker (default) or one broker's memory")
    add_client_config_argument(parser)


def add_client_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting for every client (repeatable), e.g. "
                             "security.protocol=SASL_SSL; never written to test.json or the report")


def system_options(args) -> dict:
    """The options the command line gives the chosen system; one line for a flag it has not."""
    from harness.errors import GregorError
    system = getattr(args, "system", "kafka")
    have = getattr(registry.system_class(system), "OPTIONS", ())
    options = {}
    for option, flag in SYSTEM_FLAGS.items():
        value = getattr(args, option, None)
        if value is None:
            continue
        if option not in have:
            owners = [name for name in registry.SYSTEMS if option in getattr(registry.system_class(name), "OPTIONS", ())]
            raise GregorError(f"{flag} is an option of the {' and '.join(owners)} system, not of {system}")
        options[option] = value
    if system == "external":
        backend = getattr(args, "backend", "local")
        if backend == "docker":
            raise GregorError("an external cluster needs no containers: use --backend local (its clients only) "
                              "or --backend ssh --hosts ... (with its brokers' hosts)")
        # a backend that reaches existing machines (SSH) gives the brokers' hosts as nodes
        options["hosts"] = not getattr(registry.backend_class(backend), "creates_machines", True)
    return options


def client_config(args) -> dict:
    """--client-config pairs; Gregor's own recorded settings are refused (use their flags)."""
    from harness.errors import GregorError
    result = {}
    for pair in getattr(args, "client_config", None) or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GregorError(f"bad --client-config {pair!r}: use key=value, e.g. security.protocol=SASL_SSL")
        if key in OWN_CLIENT_KEYS:
            raise GregorError(f"--client-config {key} would change a setting Gregor records in test.json; "
                              "use gregor run's own flag for it")
        result[key] = value.strip()
    return result
