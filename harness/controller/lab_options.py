"""The options that name a lab and what it runs: --lab, --backend, --system, --version,
and the SSH backend's --hosts, --ssh-key, --known-hosts, --vagrant, --insecure-host-keys.

Shared by `gregor lab`, `gregor run` and `gregor demo`, so the three can never
disagree on a default. A backend's options go to `registry.backend(name,
**backend_options(args))` and are kept in the lab's state file.
"""

from __future__ import annotations

import argparse
import os

from ground.errors import GregorError
from harness import registry

# option dest -> flag, for the SSH backend; paths are made absolute (the state
# file is read from other directories later).
SSH_OPTIONS = {
    "hosts": "--hosts",
    "ssh_key": "--ssh-key",
    "known_hosts": "--known-hosts",
    "vagrant": "--vagrant",
    "insecure_host_keys": "--insecure-host-keys",
}
_PATHS = ("ssh_key", "known_hosts", "vagrant")


def _choice(table: dict, what: str):
    def check(text: str) -> str:
        if text not in table:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; choose one of {', '.join(table)}")
        return text

    return check


def add_lab_arguments(parser: argparse.ArgumentParser, system: bool = True) -> None:
    parser.add_argument(
        "--lab",
        default=None,
        metavar="NAME",
        help="lab name (default $GREGOR_LAB, else one per backend: "
        + ", ".join(f"{b} {n}" for b, n in registry.DEFAULT_LAB.items() if b in registry.BACKENDS)
        + "); labs with different names coexist",
    )
    parser.add_argument(
        "--backend",
        default="local",
        type=_choice(registry.BACKENDS, "backend"),
        metavar="|".join(registry.BACKENDS),
        help="where the nodes live: local network namespaces (default, no daemon, no VM), "
        "Docker containers, or hosts over SSH (--hosts or --vagrant)",
    )
    if system:
        parser.add_argument(
            "--system",
            default="kafka",
            type=_choice(registry.SYSTEMS, "system"),
            metavar="|".join(registry.SYSTEMS),
            help="what runs on the nodes (default kafka)",
        )
        parser.add_argument(
            "--version", default=None, metavar="V", help="the system's version (default: the system's own default)"
        )
    add_ssh_arguments(parser)


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """The SSH backend's hosts and how to log in to them (kept apart for scripts that name no lab)."""
    ssh = parser.add_argument_group("ssh backend (--backend ssh)")
    ssh.add_argument(
        "--hosts",
        default=None,
        metavar="USER@HOST[:PORT],...",
        help="one host per node, e.g. root@10.0.0.11,root@10.0.0.12:2222,root@10.0.0.13",
    )
    ssh.add_argument(
        "--ssh-key",
        default=None,
        metavar="FILE",
        help="private key to log in with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa; with "
        "--vagrant, the key Vagrant names)",
    )
    ssh.add_argument(
        "--known-hosts",
        default=None,
        metavar="FILE",
        help="known_hosts file the host keys are checked against (default ~/.ssh/known_hosts)",
    )
    ssh.add_argument(
        "--vagrant",
        default=None,
        metavar="DIR",
        help="the hosts of the Vagrant lab in DIR (vagrant ssh-config; vagrant/README.md)",
    )
    ssh.add_argument(
        "--insecure-host-keys",
        action="store_true",
        default=None,
        help="do not check host keys (the report says so); only for throwaway hosts",
    )


def backend_options(args) -> dict:
    """What the chosen backend's constructor takes from the command line;
    an SSH option with another backend is refused."""
    given = {dest: getattr(args, dest, None) for dest in SSH_OPTIONS}
    given = {dest: value for dest, value in given.items() if value not in (None, False)}
    if getattr(args, "backend", "local") != "ssh":
        if given:
            flag = SSH_OPTIONS[next(iter(given))]
            raise GregorError(f"{flag} is an option of the ssh backend; add --backend ssh")
        return {}
    for dest in _PATHS:
        if dest in given:
            given[dest] = os.path.abspath(os.path.expanduser(given[dest]))
    return given


def backend_flags(options: dict) -> list[str]:
    """The command-line flags that give these backend options again."""
    flags = []
    for dest, value in options.items():
        flags += [SSH_OPTIONS[dest]] if value is True else [SSH_OPTIONS[dest], str(value)]
    return flags


# --- what one system takes besides its version ---------------------------------------------
# flag -> the system option it sets (each system lists the options it has in OPTIONS)
SYSTEM_FLAGS = {
    "bootstrap": "--bootstrap",
    "controllers": "--controllers",
    "transaction_version": "--transaction-version",
    "storage": "--storage",
}

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
    group = parser.add_argument_group("system options")
    group.add_argument(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT,...",
        help="external: the bootstrap servers of a cluster Gregor did not start",
    )
    group.add_argument(
        "--controllers",
        default=None,
        metavar="N",
        help="kafka: N dedicated KRaft controllers (k1..kN) beside the brokers (default 0: every node is both)",
    )
    group.add_argument(
        "--transaction-version",
        default=None,
        metavar="0|1|2",
        help="kafka: the transaction.version feature to format the cluster with "
        "(default: the version's own, 2 from 4.0)",
    )
    group.add_argument(
        "--storage",
        default=None,
        metavar="postgres|memory",
        help="tansu: PostgreSQL shared by every broker (default) or one broker's memory",
    )
    add_client_config_argument(parser)


def add_client_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting for every client (repeatable), e.g. "
        "security.protocol=SASL_SSL; never written to test.json or the report",
    )


def system_options(args) -> dict:
    """The options the command line gives the chosen system; one line for a flag it has not."""
    from ground.errors import GregorError

    system = getattr(args, "system", "kafka")
    have = getattr(registry.system_class(system), "OPTIONS", ())
    options = {}
    for option, flag in SYSTEM_FLAGS.items():
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
