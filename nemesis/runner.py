"""The nemesis of one run: a background thread that follows the seeded plan.

`gregor run` starts it before the main phase and calls stop() from its
`finally`; stop() heals every fault still in force and records the heals.
Where nobody handles SIGTERM yet, it unwinds like Ctrl-C so that `finally`
runs for it too; a crash is covered by the ledger.

Given the main phase's deadline, it starts no fault that could not be held
and healed with `tail_s` of ordinary operation left after it: writes that
go on after a heal reuse the offsets a lossy election truncated, and that
reuse is what makes a lost write visible (a loss in the last seconds would
only leave the final drain waiting for offsets that no longer exist). After
a power cut's heal that tail counts from when the brokers serve again.
"""

from __future__ import annotations

import atexit
import random
import threading
import time
from collections import Counter

from ground.errors import GregorError
from ground.faults import NETEM, with_composites
from ground.signals import unwind_on_sigterm
from nemesis import netem, pause, power
from nemesis.faults import Nemesis
from nemesis.heal import implementation
from nemesis.ledger import Ledger
from nemesis.schedule import FAULTS, Step, plan
from nemesis.targets import parse_target


class NemesisRunner:
    def __init__(
        self,
        ctx,
        faults,
        interval_s: float = 10.0,
        targets=None,
        seed: int = 0,
        progress=None,
        deadline: float | None = None,
        tail_s: float | None = None,
        shape: str | None = None,
        hold_s: float | None = None,
        wire_rules=(),
    ):
        from nemesis.schedule import DEFAULT_TARGETS

        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise GregorError(f"unknown nemesis fault {unknown[0]!r}; use {', '.join(FAULTS)}")
        if interval_s <= 0:
            raise GregorError(f"--nemesis-interval must be positive, got {interval_s}")
        self.ctx = ctx
        self.faults = list(faults)
        self.interval_s = float(interval_s)
        self.targets = [parse_target(t) for t in (targets or DEFAULT_TARGETS)]
        self.seed = seed
        self.progress = progress or (lambda message: None)
        self.deadline = deadline  # time.monotonic() at which the main phase ends
        self.tail_s = float(interval_s if tail_s is None else tail_s)
        self._nemesis: Nemesis | None = None
        self._ledger = Ledger.for_lab(ctx.lab.name)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one apply or heal at a time
        self._active: dict[str, dict] = {}
        self._thread: threading.Thread | None = None
        self._restore_sigterm = lambda: None
        self._stopped = False
        self._log: list[dict] = []
        self._counts: Counter = Counter()
        self.netem_profiles = None
        if NETEM in self.faults:
            self.netem_profiles = netem.usable_profiles()
        self.shape, self.hold_s = shape, hold_s
        self.wire_rules = list(wire_rules)
        self._plan = (
            plan(
                self.faults,
                self.targets,
                seed,
                self.interval_s,
                self.netem_profiles,
                node_faults=self._node_faults(ctx.lab),
                shape=shape,
                hold_s=hold_s,
                wire_rules=self.wire_rules,
            )
            if self.faults
            else iter(())
        )

    @staticmethod
    def _node_faults(lab):
        """What the lab's system takes on its nodes; a lab that does not say takes every fault."""
        ask = getattr(lab, "node_faults", None)
        return with_composites(ask()) if ask else None

    # --- the contract ---------------------------------------------------------

    def start(self) -> None:
        """Starts the schedule in a background thread (nothing for `none`)."""
        if not self.faults or self._thread:
            return
        self._restore_sigterm = unwind_on_sigterm()
        atexit.register(self.stop)
        self._thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the schedule and heals every fault in force. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(60.0, self.interval_s))
        with self._lock:
            self._stopped = True
            for entry in list(self._active.values()):
                self._heal(entry)
        self._restore_sigterm()
        atexit.unregister(self.stop)

    def schedule_summary(self) -> dict:
        """For test.json: the parameters and what was done (the history has
        the details)."""
        return {
            "faults": self.faults,
            "interval_s": self.interval_s,
            "targets": self.targets,
            "seed": self.seed,
            "netem_profiles": self.netem_profiles,
            "tail_s": self.tail_s,
            "shape": self.shape,
            "hold_s": self.hold_s,
            **({"wire_rules": self.wire_rules} if self.wire_rules else {}),
            "counts": dict(self._counts),
            "ops": list(self._log),
        }

    # --- the thread -------------------------------------------------------------

    @staticmethod
    def held_s(step: Step) -> float:
        """How long the step keeps the cluster from ordinary operation: its
        hold, and what comes before or after it for some faults."""
        return step.hold_s + getattr(implementation(step.fault), "EXTRA_HELD_S", 0.0)

    def room_for(self, step: Step) -> bool:
        """Whether the step can be held, healed and followed by tail_s of writes
        before the main phase ends."""
        return self.deadline is None or time.monotonic() + self.held_s(step) + self.tail_s <= self.deadline

    def _loop(self) -> None:
        for step in self._plan:
            if self._stop.wait(step.quiet_s):
                return
            if not self.room_for(step):
                self.progress(
                    f"nemesis: no room for another fault before the end ({step.fault} held "
                    f"{self.held_s(step):g} s + {self.tail_s:g} s of writes after the heal)"
                )
                return
            entry = self._start(step)
            if entry is None or entry.get("instant"):  # skipped, or nothing to hold or heal
                continue
            self._stop.wait(step.hold_s)
            with self._lock:
                if entry["id"] in self._active:
                    self._heal(entry)
            if getattr(implementation(entry["fault"]), "SERVES_LATE", False):
                self._wait_serving(entry.get("nodes", []))
            if self._stop.is_set():
                return

    def _wait_serving(self, nodes: list[str]) -> None:
        """After a power cut's heal, waits (until the main phase ends) for the
        brokers to serve: the tail of writes that reuse lost offsets, and the
        next fault's interval, count from then, not from the processes' start."""
        started = time.monotonic()
        until = self.deadline if self.deadline is not None else started + 3 * power.RESTART_S
        while not self._stop.is_set() and time.monotonic() < until:
            if power.serving(self.ctx.lab, nodes):
                self.progress(
                    f"nemesis: {', '.join(nodes)} serving again {time.monotonic() - started:.1f} s after the heal"
                )
                return
            self._stop.wait(0.5)
        if not self._stop.is_set():
            self.progress(f"nemesis: {', '.join(nodes)} not serving by the end of the main phase")

    def _start(self, step: Step) -> dict | None:
        with self._lock:
            if self._stopped or self._stop.is_set():
                return None
            try:
                entry = self.nemesis().start(step)
            except Exception as error:  # never let one fault end the schedule
                self.progress(f"nemesis: {step.fault} on {step.target} failed: {error}")
                self._counts["errors"] += 1
                return None
            if entry is None:
                self._counts["skipped"] += 1
                return None
            if not entry.get("instant"):
                self._active[entry["id"]] = entry
            self._counts[step.fault] += 1
            self._log.append(
                {
                    "time": self._now(),
                    "fault": step.fault,
                    "target": step.target,
                    **({"shape": step.shape} if step.shape else {}),
                    **({"profile": step.profile} if step.profile else {}),
                    **({"rule": step.rule} if step.rule else {}),
                    "role": entry.get("role"),
                    "nodes": entry.get("nodes", []),
                }
            )
            self.progress(f"nemesis: {step.fault} {entry.get('role')} {entry.get('nodes', [])}")
            return entry

    def _heal(self, entry: dict) -> None:
        """Caller holds the lock."""
        try:
            self.nemesis().stop(entry)
        except Exception as error:
            self.progress(f"nemesis: heal of {entry} failed ({error}); healing every node and wire rule")
            self.ctx.lab.heal_in_run()  # not heal_all: the run's clients still use its relays and places
            for client in entry.get("clients", []):
                if "pid" in client:
                    pause.resume_client(client)
            self._ledger.remove(entry["id"])
        self._active.pop(entry["id"], None)

    # --- helpers ------------------------------------------------------------------

    def nemesis(self) -> Nemesis:
        if self._nemesis is None:
            self._nemesis = Nemesis(self.ctx, self._ledger, random.Random(f"nemesis-targets:{self.seed}"))
        return self._nemesis

    def _now(self):
        now = getattr(self.ctx, "now_ns", None)
        return now() if now else None
