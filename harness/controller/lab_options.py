"""The options that name a lab and what it runs: --lab, --backend, --system, --version,
and the SSH backend's --hosts, --ssh-key, --known-hosts, --vagrant, --insecure-host-keys.

Shared by `gregor lab`, `gregor run` and `gregor demo`, so the three can never
disagree on a default. A backend's options go to `registry.backend(name,
**backend_options(args))` and are kept in the lab's state file.
"""

from __future__ import annotations

import argparse
import os

from harness import registry
from harness.errors import GregorError

# option dest -> flag, for the SSH backend; paths are made absolute (the state
# file is read from other directories later).
SSH_OPTIONS = {"hosts": "--hosts", "ssh_key": "--ssh-key", "known_hosts": "--known-hosts",
               "vagrant": "--vagrant", "insecure_host_keys": "--insecure-host-keys"}
_PATHS = ("ssh_key", "known_hosts", "vagrant")


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
                        help="where the nodes live: local network namespaces (default, no daemon, no VM), "
                             "Docker containers, or hosts over SSH (--hosts or --vagrant)")
    if system:
        parser.add_argument("--system", default="kafka", type=_choice(registry.SYSTEMS, "system"),
                            metavar="|".join(registry.SYSTEMS), help="what runs on the nodes (default kafka)")
        parser.add_argument("--version", default=None, metavar="V",
                            help="the system's version (default: the system's own default)")
    add_ssh_arguments(parser)


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """The SSH backend's hosts and how to log in to them (kept apart for scripts that name no lab)."""
    ssh = parser.add_argument_group("ssh backend (--backend ssh)")
    ssh.add_argument("--hosts", default=None, metavar="USER@HOST[:PORT],...",
                     help="one host per node, e.g. root@10.0.0.11,root@10.0.0.12:2222,root@10.0.0.13")
    ssh.add_argument("--ssh-key", default=None, metavar="FILE",
                     help="private key to log in with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa; with "
                          "--vagrant, the key Vagrant names)")
    ssh.add_argument("--known-hosts", default=None, metavar="FILE",
                     help="known_hosts file the host keys are checked against (default ~/.ssh/known_hosts)")
    ssh.add_argument("--vagrant", default=None, metavar="DIR",
                     help="the hosts of the Vagrant lab in DIR (vagrant ssh-config; vagrant/README.md)")
    ssh.add_argument("--insecure-host-keys", action="store_true", default=None,
                     help="do not check host keys (the report says so); only for throwaway hosts")


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
