"""Undoing faults: one heal per ledger entry, and the sweep after a crash.

The same function heals a fault at the end of its hold, at runner.stop(),
and after a crashed run (from the ledger), so the three paths cannot drift.
"""

from __future__ import annotations

from nemesis import kill, netem, pause
from nemesis.ledger import Ledger


def heal_entry(lab, entry: dict) -> dict:
    """Undoes one ledger entry; returns what was actually done.

    Every step is idempotent (healing a healed link, resuming a running
    broker), so a heal interrupted half-way can simply be run again.
    """
    fault = entry.get("fault")
    nodes = list(entry.get("nodes", []))
    if fault == "partition":
        for name in nodes:
            lab.node(name).heal_network()
        out = {"healed": nodes}
        if entry.get("places"):
            out["healed_places"] = []
            for name in entry["places"]:
                place = lab.client_place(name, create=False)
                if place is not None:  # gone already: nothing left to heal
                    lab.place_node(place).heal_network()
                    out["healed_places"].append(name)
        return out
    if fault == "pause":
        resumed = pause.resume_nodes(lab, nodes)
        clients = [c.get("process") for c in entry.get("clients", []) if pause.resume_client(c)]
        out: dict = {"resumed": resumed}
        if entry.get("clients"):
            out["resumed_clients"] = clients
        return out
    if fault in ("kill", "power-loss"):  # after a power cut, start_nodes mounts the storage first
        return {"started": kill.start_nodes(lab, nodes)}  # a killed client was replaced already
    if fault == "lone-leader":
        for name in nodes:
            lab.node(name).heal_network()
        return {"healed": nodes, "started": kill.start_nodes(lab, nodes)}
    if fault == "netem":
        netem.clear(lab, nodes)
        return {"cleared": nodes}

    raise ValueError(f"unknown fault in ledger entry: {entry!r}")


def heal_leftovers(lab, progress=None) -> list[dict]:
    """Heals what a crashed run of this lab left, from its ledger.

    Called by `gregor run` before it starts. Client processes are resumed
    from the ledger (the lab knows nothing of them); nodes get the lab-wide
    heal too, in case a fault was applied between two ledger writes.
    Returns the healed entries.
    """
    ledger = Ledger.for_lab(lab.name)
    entries = ledger.entries()
    if not entries:
        return []
    say = progress or (lambda message: None)
    say(f"nemesis: healing {len(entries)} fault(s) left by an earlier run")
    for entry in entries:
        try:
            heal_entry(lab, entry)
        except Exception as error:  # the lab-wide heal below still covers nodes
            say(f"nemesis: could not heal {entry}: {error}")
        ledger.remove(entry["id"])
    lab.heal_all()
    return entries


def release_clients(lab_name: str) -> list[int]:
    """For `lab down`: resumes paused client processes a crashed run left
    and forgets the ledger (the nodes themselves are going away)."""
    ledger = Ledger.for_lab(lab_name)
    resumed = []
    for entry in ledger.entries():
        for client in entry.get("clients", []):
            if "pid" in client and pause.resume_client(client):
                resumed.append(client["pid"])
    ledger.clear()
    return resumed
