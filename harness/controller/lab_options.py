"""The options that name a lab and what it runs: --lab, --backend, --system, --version,
and the SSH backend's --hosts, --ssh-key, --known-hosts, --vagrant, --insecure-host-keys.

Each is declared once (ground/options.py's Option) and shared by `gregor lab`,
`gregor run` and `gregor demo`, so the three can never disagree on a default;
`gregor run` composes them into its run configuration (run_config.py). A backend's options go to `registry.backend(name,
**backend_options(args))` and are kept in the lab's state file.
"""

from __future__ import annotations

import argparse
import os

from ground.errors import GregorError
from ground.options import REPEAT, SWITCH, Option, add_options, to_argv
from harness import registry


def _choice(table: dict, what: str):
    def check(text: str) -> str:
        if text not in table:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; choose one of {', '.join(table)}")
        return text

    return check


LAB = Option(
    "--lab",
    metavar="NAME",
    help="lab name (default $GREGOR_LAB, else one per backend: "
    + ", ".join(f"{b} {n}" for b, n in registry.DEFAULT_LAB.items() if b in registry.BACKENDS)
    + "); labs with different names coexist",
)
BACKEND = Option(
    "--backend",
    default="local",
    type=_choice(registry.BACKENDS, "backend"),
    metavar="|".join(registry.BACKENDS),
    help="where the nodes live: local network namespaces (default, no daemon, no VM), "
    "Docker containers, or hosts over SSH (--hosts or --vagrant)",
)
SYSTEM = Option(
    "--system",
    default="kafka",
    type=_choice(registry.SYSTEMS, "system"),
    metavar="|".join(registry.SYSTEMS),
    help="what runs on the nodes (default kafka)",
)
VERSION = Option("--version", metavar="V", help="the system's version (default: the system's own default)")

# The SSH backend's hosts and how to log in to them; each option's dest is the
# backend's constructor argument. Paths are made absolute (the state file is
# read from other directories later).
SSH_GROUP = "ssh backend (--backend ssh)"
SSH_OPTIONS = (
    Option(
        "--hosts",
        metavar="USER@HOST[:PORT],...",
        group=SSH_GROUP,
        help="one host per node, e.g. root@10.0.0.11,root@10.0.0.12:2222,root@10.0.0.13",
    ),
    Option(
        "--ssh-key",
        metavar="FILE",
        group=SSH_GROUP,
        help="private key to log in with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa; with "
        "--vagrant, the key Vagrant names)",
    ),
    Option(
        "--known-hosts",
        metavar="FILE",
        group=SSH_GROUP,
        help="known_hosts file the host keys are checked against (default ~/.ssh/known_hosts)",
    ),
    Option(
        "--vagrant",
        metavar="DIR",
        group=SSH_GROUP,
        help="the hosts of the Vagrant lab in DIR (vagrant ssh-config; vagrant/README.md)",
    ),
    Option(
        "--insecure-host-keys",
        kind=SWITCH,
        default=None,
        group=SSH_GROUP,
        help="do not check host keys (the report says so); only for throwaway hosts",
    ),
)
_PATHS = ("ssh_key", "known_hosts", "vagrant")


def add_lab_arguments(parser: argparse.ArgumentParser, system: bool = True) -> None:
    add_options(parser, (LAB, BACKEND, *((SYSTEM, VERSION) if system else ()), *SSH_OPTIONS))


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """The SSH backend's hosts and how to log in to them (kept apart for scripts that name no lab)."""
    add_options(parser, SSH_OPTIONS)


def backend_options(args) -> dict:
    """What the chosen backend's constructor takes from the command line;
    an SSH option with another backend is refused."""
    given = {option.dest: getattr(args, option.dest, None) for option in SSH_OPTIONS}
    given = {dest: value for dest, value in given.items() if value not in (None, False)}
    if getattr(args, "backend", "local") != "ssh":
        if given:
            flag = next(option.flag for option in SSH_OPTIONS if option.dest in given)
            raise GregorError(f"{flag} is an option of the ssh backend; add --backend ssh")
        return {}
    for dest in _PATHS:
        if dest in given:
            given[dest] = os.path.abspath(os.path.expanduser(given[dest]))
    return given


def backend_settings(options: dict) -> dict:
    """Backend options by the name of the option that gives each ({"insecure-host-keys": True})."""
    names = {option.dest: option.name for option in SSH_OPTIONS}
    return {names[dest]: value for dest, value in options.items()}


def recorded_backend_settings(options: dict) -> dict:
    """Backend options as a run's files record them: without --ssh-key, since a run's files
    never name a private key."""
    return {name: value for name, value in backend_settings(options).items() if name != "ssh-key"}


def backend_flags(options: dict) -> list[str]:
    """The command-line flags that give these backend options again."""
    return to_argv(SSH_OPTIONS, backend_settings(options))


# --- what one system takes besides its version ---------------------------------------------
# Each option's dest is the system option it sets (each system lists the options it has in OPTIONS).
SYSTEM_GROUP = "system options"
SYSTEM_OPTIONS = (
    Option(
        "--bootstrap",
        metavar="HOST:PORT,...",
        group=SYSTEM_GROUP,
        help="external: the bootstrap servers of a cluster Gregor did not start",
    ),
    Option(
        "--controllers",
        metavar="N",
        group=SYSTEM_GROUP,
        help="kafka: N dedicated KRaft controllers (k1..kN) beside the brokers (default 0: every node is both)",
    ),
    Option(
        "--transaction-version",
        metavar="0|1|2",
        group=SYSTEM_GROUP,
        help="kafka: the transaction.version feature to format the cluster with "
        "(default: the version's own, 2 from 4.0)",
    ),
    Option(
        "--storage",
        metavar="postgres|memory",
        group=SYSTEM_GROUP,
        help="tansu: PostgreSQL shared by every broker (default) or one broker's memory",
    ),
)
CLIENT_CONFIG = Option(
    "--client-config",
    kind=REPEAT,
    default=(),
    metavar="KEY=VALUE",
    help="a librdkafka setting for every client (repeatable), e.g. "
    "security.protocol=SASL_SSL; never written to test.json or the report",
)

# Settings Gregor sets itself and records in test.json ("client"): --client-config
# may not change them behind the record's back.
OWN_CLIENT_KEYS = (
    "bootstrap.servers",
    "acks",
    "enable.idempotence",
    "isolation.level",
    "transactional.id",
    "transaction.timeout.ms",
    "enable.auto.commit",
    "group.id",
    "retries",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
)


def add_system_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of one system: a cluster to use, its topology, its features."""
    add_options(parser, (*SYSTEM_OPTIONS, CLIENT_CONFIG))


def add_client_config_argument(parser: argparse.ArgumentParser) -> None:
    add_options(parser, (CLIENT_CONFIG,))


def system_options(args) -> dict:
    """The options the command line gives the chosen system; one line for a flag it has not."""
    from ground.errors import GregorError

    system = getattr(args, "system", "kafka")
    have = getattr(registry.system_class(system), "OPTIONS", ())
    options = {}
    for declared in SYSTEM_OPTIONS:
        option, flag = declared.dest, declared.flag
        value = getattr(args, option, None)
        if value is None:
            continue
        if option not in have:
            owners = [
                name for name in registry.SYSTEMS if option in getattr(registry.system_class(name), "OPTIONS", ())
            ]
            raise GregorError(f"{flag} is an option of the {' and '.join(owners)} system, not of {system}")
        options[option] = value
    if system == "external":
        backend = getattr(args, "backend", "local")
        if backend == "docker":
            raise GregorError(
                "an external cluster needs no containers: use --backend local (its clients only) "
                "or --backend ssh --hosts ... (with its brokers' hosts)"
            )
        # a backend that reaches existing machines (SSH) gives the brokers' hosts as nodes
        options["hosts"] = not getattr(registry.backend_class(backend), "creates_machines", True)
    return options


def client_config(args) -> dict:
    """--client-config pairs; Gregor's own recorded settings are refused (use their flags)."""
    from ground.errors import GregorError

    result = {}
    for pair in getattr(args, "client_config", None) or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GregorError(f"bad --client-config {pair!r}: use key=value, e.g. security.protocol=SASL_SSL")
        if key in OWN_CLIENT_KEYS:
            raise GregorError(
                f"--client-config {key} would change a setting Gregor records in test.json; "
                "use gregor run's own flag for it"
            )
        result[key] = value.strip()
    return result
