"""Whether an SSH lab's machines are still there, asked from this host alone.

A lab's state file can outlive its machines: `vagrant destroy` without
`gregor lab down`, a network that went away, a host reinstalled. The
recorded addresses may then belong to someone else's machines (a private
range reused), and the packets to them leave by whatever route is left. So
before an SSH lab is reused, two kinds of local evidence, neither of which
sends a packet:

- a Vagrant lab: `vagrant status` in the lab's directory (with the dotfile
  folder it was brought up with) shows each of its machines running;
- every lab: the route to each recorded address still leaves through the
  interface it left through at `lab up` (`ip route get` asks the kernel's
  table; nothing goes on the wire).

Only then does the SSH backend open one connection to each recorded
endpoint, its host key checked as always (ssh.py).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess

from ground.errors import GregorError
from harness.backends import netns

VAGRANT_STATUS_TIMEOUT_S = 120
# Tells the lab's Vagrantfile that it is only looked at: it then makes no keys
# and builds no image (a destroyed lab's folder stays empty).
LOOK_ONLY = "GREGOR_VAGRANT_LOOK"


def route_device(address: str) -> str | None:
    """The interface this host's packets to `address` leave through (None: no route)."""
    try:
        return netns.route_to(address).get("dev")
    except (OSError, subprocess.TimeoutExpired):
        return None


def routes(addresses: list[str]) -> dict[str, str | None]:
    """{address: interface} for each IPv4 address among `addresses` (host names are skipped)."""
    found = {}
    for address in addresses:
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            continue
        found[address] = route_device(address)
    return found


def moved_routes(recorded: dict[str, str | None]) -> str | None:
    """Why the routes recorded at `lab up` no longer hold, or None while they all do."""
    moved = []
    for address, device in recorded.items():
        now = route_device(address)
        if now != device:
            moved.append(f"{address} via {now or 'no route'} (was {device or 'no route'})")
    if not moved:
        return None
    return (
        f"the route{'s' if len(moved) > 1 else ''} to {', '.join(moved)} changed since lab up: "
        "the network its machines were on is gone"
    )


def dotfile(directory: str) -> str | None:
    """The Vagrant dotfile folder of a lab brought up now ($VAGRANT_DOTFILE_PATH, else None: .vagrant)."""
    given = os.environ.get("VAGRANT_DOTFILE_PATH")
    return os.path.join(os.path.abspath(directory), given) if given else None


def vagrant_states(directory: str, dotfile_path: str | None) -> dict[str, str]:
    """{machine: state} from `vagrant status --machine-readable` (GregorError if Vagrant cannot say)."""
    if not os.path.isfile(os.path.join(directory, "Vagrantfile")):
        raise GregorError(f"{directory} has no Vagrantfile any more")
    env = {key: value for key, value in os.environ.items() if key != "VAGRANT_DOTFILE_PATH"}
    env[LOOK_ONLY] = "1"
    if dotfile_path:
        env["VAGRANT_DOTFILE_PATH"] = dotfile_path
    try:
        result = subprocess.run(
            ["vagrant", "status", "--machine-readable"],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=VAGRANT_STATUS_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GregorError("vagrant is not installed any more, so its machines cannot be shown to run") from None
    except subprocess.TimeoutExpired:
        raise GregorError(f"vagrant status in {directory} did not answer within {VAGRANT_STATUS_TIMEOUT_S} s") from None
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        raise GregorError(f"vagrant status in {directory} failed: {' '.join(lines)[:200] or 'no output'}")
    states = {}
    for line in result.stdout.splitlines():
        fields = line.split(",")
        if len(fields) >= 4 and fields[2] == "state" and fields[1]:
            states[fields[1]] = fields[3]
    return states


def vagrant_not_running(directory: str, machines: list[str], dotfile_path: str | None) -> str | None:
    """Why the lab's Vagrant machines are not all running, or None when they are."""
    try:
        states = vagrant_states(directory, dotfile_path)
    except GregorError as error:
        return str(error)
    down = [machine for machine in machines if states.get(machine) != "running"]
    if not down:
        return None
    how = sorted({states.get(machine, "unknown to it") for machine in down})
    return (
        f"the Vagrant machine{'s' if len(down) > 1 else ''} {', '.join(down)} in {directory} "
        f"{'are' if len(down) > 1 else 'is'} not running (vagrant status: {', '.join(how).replace('_', ' ')})"
    )
