"""SIGKILL of brokers, and their restart.

A kill loses whatever the broker had not flushed or replicated; with
acks=1 that includes writes it already acknowledged.
"""

from __future__ import annotations

from ground.faults import KILL
from nemesis.values import fault_value


def kill_nodes(lab, names) -> list[str]:
    done = []
    for name in names:
        lab.node(name).kill()
        done.append(name)
    return done


def start_nodes(lab, names) -> list[str]:
    """Starts the brokers that are dead (a paused one is resumed instead,
    so a heal never leaves a broker stopped)."""
    done = []
    for name in names:
        node = lab.node(name)
        state = node.state()
        if state == "dead":
            lab.start_node(name)
            done.append(name)
        elif state == "paused":
            node.resume()
            done.append(name)
    return done


# --- the fault (ground/faults.py: kill) ----------------------------------------


def start(nemesis, step, target):
    entry = nemesis.ledger.add({"fault": KILL, "nodes": list(target.nodes), "role": target.role})
    return entry, fault_value(target.nodes, role=target.role, killed=kill_nodes(nemesis.lab, target.nodes))


def heal(lab, entry: dict) -> dict:
    return {"started": start_nodes(lab, list(entry.get("nodes", [])))}
