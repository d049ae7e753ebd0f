"""Undoing faults: one heal per ledger entry, and the sweep after a crash.

The same function heals a fault at the end of its hold, at runner.stop(),
and after a crashed run (from the ledger), so the three paths cannot drift.
Each fault kind's heal is its own module's `heal` (ground/faults.py names it).
"""

from __future__ import annotations

import importlib

from ground import faults
from nemesis import pause
from nemesis.ledger import Ledger


def implementation(name: str):
    """The nemesis module that applies and heals a fault kind (ground/faults.py)."""
    kind = faults.BY_NAME.get(name)
    if kind is None or kind.module is None:
        raise ValueError(f"no fault kind {name!r} that Gregor can apply or heal")
    return importlib.import_module(kind.module)


def heal_entry(lab, entry: dict) -> dict:
    """Undoes one ledger entry; returns what was actually done.

    Every step is idempotent (healing a healed link, resuming a running
    broker), so a heal interrupted half-way can simply be run again.
    """
    try:
        module = implementation(entry.get("fault"))
    except ValueError:
        raise ValueError(f"unknown fault in ledger entry: {entry!r}") from None
    return module.heal(lab, entry)


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
