"""SIGSTOP/SIGCONT of brokers and of client processes.

A paused broker keeps its sockets and leadership claims while the others
move on; a paused client wakes up as a zombie: a producer with an old epoch,
a consumer that still thinks it owns its partitions.
"""

from __future__ import annotations

import signal
import time

from ground.faults import PAUSE
from ground.procfs import group_members, identity, proc_state, same_process
from ground.signals import signal_client
from nemesis.targets import TargetUnavailable
from nemesis.values import fault_value


def _signal_and_wait(ident: dict, sig: int, stopped: bool, timeout: float = 5.0) -> bool:
    """Sends sig to the client (with its JVM, if any: its process group), then waits
    until /proc shows every process of it (not) stopped, since signal delivery is
    asynchronous. False if the client is gone."""
    if not same_process(ident) or not signal_client(ident["pid"], sig):
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc_state(ident["pid"]) is None:
            return False
        states = [proc_state(pid) for pid in group_members(ident["pid"]) or [ident["pid"]]]
        if all(state is None or (state in "Tt") == stopped for state in states):
            break
        time.sleep(0.01)
    return True


def pause_client(ident: dict) -> bool:
    """SIGSTOP; False if the process is already gone."""
    return _signal_and_wait(ident, signal.SIGSTOP, stopped=True)


def resume_client(ident: dict) -> bool:
    """SIGCONT if it is still the same process; False if it is gone."""
    return _signal_and_wait(ident, signal.SIGCONT, stopped=False)


def pause_nodes(lab, names) -> list[str]:
    done = []
    for name in names:
        lab.node(name).pause()
        done.append(name)
    return done


def resume_nodes(lab, names) -> list[str]:
    """Resumes those still paused (a node may have died meanwhile)."""
    done = []
    for name in names:
        node = lab.node(name)
        if node.state() == "paused":
            node.resume()
            done.append(name)
    return done


# --- the fault (ground/faults.py: pause) ---------------------------------------


def start(nemesis, step, target):
    """SIGSTOP of brokers, or of client processes (checked by their start time)."""
    idents = [dict(i, process=c.process) for c in target.clients if (i := identity(c.pid)) is not None]
    if target.clients and not idents:
        raise TargetUnavailable("the client process exited before it could be paused")
    entry = nemesis.ledger.add({"fault": PAUSE, "nodes": list(target.nodes), "clients": idents, "role": target.role})
    paused = pause_nodes(nemesis.lab, target.nodes)
    fields = {"role": target.role, "paused": paused}
    if idents:
        done = [i for i in idents if pause_client(i)]
        fields["paused_clients"] = [i["process"] for i in done]
        fields["client_pids"] = [i["pid"] for i in done]
    return entry, fault_value(target.nodes, [i["process"] for i in idents], **fields)


def heal(lab, entry: dict) -> dict:
    resumed = resume_nodes(lab, list(entry.get("nodes", [])))
    clients = [c.get("process") for c in entry.get("clients", []) if resume_client(c)]
    out: dict = {"resumed": resumed}
    if entry.get("clients"):
        out["resumed_clients"] = clients
    return out
