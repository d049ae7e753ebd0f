"""SIGKILL of a client process (ground/faults.py: kill-client), which the
run replaces at once by a new process (old id + concurrency): nothing is left
to heal, so nothing goes in the ledger and the entry is `instant`."""

from __future__ import annotations

from ground.faults import KILL_CLIENT
from nemesis.targets import TargetUnavailable
from nemesis.values import fault_value


def start(nemesis, step, target):
    replace = getattr(nemesis.ctx, "kill_client", None)
    if replace is None:
        raise TargetUnavailable("this run cannot kill and replace clients")
    client = target.clients[0]
    try:
        old, new = replace(client.process)
    except LookupError as why:
        raise TargetUnavailable(str(why)) from None
    entry = {"id": f"{KILL_CLIENT}-{old}", "fault": KILL_CLIENT, "nodes": [], "instant": True}
    return entry, fault_value([], [old], role=target.role, killed=[old], replaced_by=new)


def heal(lab, entry: dict) -> dict:
    """Nothing: the killed client was replaced when it was killed."""
    return {}
