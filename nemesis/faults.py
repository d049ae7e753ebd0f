"""One fault as a pair of history operations: apply it, then heal it.

Each start is an `invoke` saying what the schedule asked for, then an
`info` completion saying what was actually done (resolved roles, nodes,
grudges); the heal is another such pair. The ledger entry is written before
the fault touches anything.

What each fault kind is, its `f` values and the module that applies and
heals it, stands in ground/faults.py; this class is what every kind
shares. Every value follows one schema (nemesis/values.py).
"""

from __future__ import annotations

import random
import threading

from ground import faults
from nemesis.heal import heal_entry, implementation
from nemesis.ledger import Ledger
from nemesis.schedule import Step
from nemesis.targets import TargetResolver, TargetUnavailable
from nemesis.values import fault_value


class Nemesis:
    """Applies steps to the lab and records them through ctx.record."""

    def __init__(self, ctx, ledger: Ledger, rng: random.Random):
        self.ctx = ctx
        self.lab = ctx.lab
        self.ledger = ledger
        self.rng = rng
        self.resolver = TargetResolver(ctx.lab, ctx, rng)
        self.op_lock = getattr(ctx, "nemesis_op", None) or threading.Lock()

    def _record(self, type_: str, f: str, value: dict, error: str | None = None) -> dict:
        event = {"process": "nemesis", "type": type_, "f": f, "value": value}
        if error:
            event["error"] = error
        return self.ctx.record(event)

    def start(self, step: Step) -> dict | None:
        """Applies one step; returns its ledger entry (to heal later), or
        None when nothing was applied (the role did not exist)."""
        f = faults.kind(step.fault).start
        self.resolver.wait_for(step.target)
        with self.op_lock:
            return self._start(step, f)

    def _start(self, step: Step, f: str) -> dict | None:
        self._record("invoke", f, fault_value([], **step.intent()))
        entry = None
        try:
            module = implementation(step.fault)
            target = self.resolver.resolve(step.target, need_place=getattr(module, "NEEDS_PLACE", False))
            entry, value = module.start(self, step, target)
        except TargetUnavailable as why:
            self._record("info", f, fault_value([], skipped=str(why), target=step.target))
            return None
        except Exception as error:
            # partly applied: the entry is in the ledger and gets healed
            self._record(
                "info",
                f,
                fault_value((entry or {}).get("nodes", []), failed=str(error), target=step.target),
                error=type(error).__name__,
            )
            return entry
        self._record("info", f, value)
        return entry

    def stop(self, entry: dict) -> dict:
        """Heals one applied fault and records it."""
        with self.op_lock:
            return self._stop(entry)

    def _stop(self, entry: dict) -> dict:
        f = faults.kind(entry["fault"]).heal
        clients = [c["process"] for c in entry.get("clients", []) if "process" in c]
        self._record("invoke", f, fault_value(entry.get("nodes", []), clients, role=entry.get("role")))
        try:
            done = heal_entry(self.lab, entry)
        except Exception as error:
            self._record(
                "info", f, fault_value(entry.get("nodes", []), clients, failed=str(error)), error=type(error).__name__
            )
            raise
        self.ledger.remove(entry["id"])
        value = fault_value(entry.get("nodes", []), clients, **done)
        self._record("info", f, value)
        return value
