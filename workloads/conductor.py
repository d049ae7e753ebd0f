"""Faults a workload itself inflicts on its own clients (pause, kill).

The zombie and group workloads need a client paused or killed at a moment
of their choosing. Each action is recorded exactly like a nemesis op
(process "nemesis", an invoke and an `info` completion saying what was done)
so checkers and reports see it beside the nemesis's own faults.
"""

from __future__ import annotations

import functools
import threading
import time

from ground.faults import KILL_CLIENT, PAUSE, WIRE, kind
from ground.procfs import identity
from nemesis import pause
from nemesis import wire as wire_fault

PAUSE_KIND, KILL_CLIENT_KIND, WIRE_KIND = kind(PAUSE), kind(KILL_CLIENT), kind(WIRE)


def _one_nemesis_op(action):
    """Holds the op lock shared with the nemesis from the action's invoke to
    its completion: both record as process "nemesis", so their ops must not
    interleave."""

    @functools.wraps(action)
    def held(self, *args, **kwargs):
        with self.op_lock:
            return action(self, *args, **kwargs)

    return held


class ClientFaults:
    """Pauses, resumes and kills client processes of a ClientPool, recorded.

    A pause goes into the fault ledger before the SIGSTOP, like every nemesis
    fault, so a crash of the controller never leaves a client stopped: the
    next run or `gregor lab down` resumes it from the ledger.
    """

    def __init__(self, pool, record, ledger, op_lock=None):
        self.pool = pool
        self.record = record
        self.ledger = ledger
        self.paused: dict[int, dict] = {}  # slot -> ledger entry
        self.lock = threading.Lock()
        self.op_lock = op_lock or threading.Lock()  # RunContext.nemesis_op, shared with the nemesis

    @_one_nemesis_op
    def pause(self, slot: int, why: str, **extra) -> bool:
        pid, process = self.pool.pid(slot), self.pool.process_of(slot)
        if pid is None:
            return False
        self.record(
            {
                "process": "nemesis",
                "type": "invoke",
                "f": PAUSE_KIND.start,
                "value": {"nodes": [], "clients": [process], "why": why, **extra},
            }
        )
        ident = identity(pid)
        entry = None
        if ident is not None:
            entry = self.ledger.add(
                {"fault": PAUSE, "nodes": [], "role": f"client:{why}", "clients": [dict(ident, process=process)]}
            )
        if entry is not None and pause.pause_client(entry["clients"][0]):
            done = {"nodes": [], "clients": [process], "paused": [process], "pids": [pid], "why": why, **extra}
            with self.lock:
                self.paused[slot] = entry
        else:
            if entry is not None:
                self.ledger.remove(entry["id"])
            done = {"nodes": [], "clients": [process], "paused": [], "why": why, "gone": [process]}
        self.record({"process": "nemesis", "type": "info", "f": PAUSE_KIND.start, "value": done})
        return bool(done["paused"])

    @_one_nemesis_op
    def resume(self, slot: int, why: str) -> None:
        with self.lock:
            entry = self.paused.pop(slot, None)
        if entry is None:
            return
        client = entry["clients"][0]
        self.record(
            {
                "process": "nemesis",
                "type": "invoke",
                "f": PAUSE_KIND.heal,
                "value": {"nodes": [], "clients": [client["process"]], "why": why},
            }
        )
        if pause.resume_client(client):
            done = {
                "nodes": [],
                "clients": [client["process"]],
                "resumed": [client["process"]],
                "pids": [client["pid"]],
                "why": why,
            }
        else:
            done = {"nodes": [], "clients": [client["process"]], "resumed": [], "gone": [client["process"]], "why": why}
        self.ledger.remove(entry["id"])
        self.record({"process": "nemesis", "type": "info", "f": PAUSE_KIND.heal, "value": done})

    def resume_all(self, why: str) -> None:
        with self.lock:
            slots = list(self.paused)
        for slot in slots:
            self.resume(slot, why)

    @_one_nemesis_op
    def kill(self, slot: int, why: str) -> None:
        process = self.pool.process_of(slot)
        self.record(
            {
                "process": "nemesis",
                "type": "invoke",
                "f": KILL_CLIENT_KIND.start,
                "value": {"nodes": [], "clients": [process], "why": why},
            }
        )
        with self.lock:
            entry = self.paused.pop(slot, None)
        old, new = self.pool.kill_and_replace(slot)
        if entry is not None:
            self.ledger.remove(entry["id"])
        self.record(
            {
                "process": "nemesis",
                "type": "info",
                "f": KILL_CLIENT_KIND.start,
                "value": {"nodes": [], "clients": [old], "killed": [old], "replaced_by": new, "why": why},
            }
        )

    @_one_nemesis_op
    def wire_on(self, lab, relay: dict | None, slot: int, text: str, why: str) -> dict | None:
        """Switches a wire rule on for one client's connections (nemesis/wire.py), recorded as
        the nemesis's start-wire; its ledger entry (for wire_off), or None when it failed."""
        process, place = self.pool.process_of(slot), self.pool.place_of(slot)
        self.record(
            {
                "process": "nemesis",
                "type": "invoke",
                "f": WIRE_KIND.start,
                "value": {"nodes": [], "clients": [process], "rule": text, "why": why},
            }
        )
        try:
            entry, value = wire_fault.switch_on(lab, self.ledger, relay, place, process, f"client:{why}", text)
        except Exception as error:  # recorded, as the nemesis records a fault it could not apply
            value = {"nodes": [], "clients": [process], "failed": str(error), "why": why}
            self.record({"process": "nemesis", "type": "info", "f": WIRE_KIND.start, "value": value})
            return None
        self.record({"process": "nemesis", "type": "info", "f": WIRE_KIND.start, "value": dict(value, why=why)})
        return entry

    @_one_nemesis_op
    def wire_off(self, lab, entry: dict, why: str) -> dict:
        """Switches the rule off again (no connection is touched); what the relay did under it."""
        clients = [c["process"] for c in entry.get("clients", [])]
        self.record(
            {"process": "nemesis", "type": "invoke", "f": WIRE_KIND.heal, "value": {"nodes": [], "clients": clients}}
        )
        done = wire_fault.heal(lab, entry)
        self.ledger.remove(entry["id"])
        value = {"nodes": [], "clients": clients, **done, "why": why}
        self.record({"process": "nemesis", "type": "info", "f": WIRE_KIND.heal, "value": value})
        return done


class Conductor(threading.Thread):
    """A background schedule of client faults; stop() heals what it did."""

    def __init__(self, faults: ClientFaults, name: str, deadline: float | None = None):
        super().__init__(name=name, daemon=True)
        self.faults = faults
        self.halt = threading.Event()
        self.deadline = deadline  # time.monotonic() at which the main phase ends

    def room_for(self, seconds: float) -> bool:
        """Whether a fault held this long still ends before the main phase does."""
        return self.deadline is None or time.monotonic() + seconds < self.deadline

    def sleep(self, seconds: float) -> bool:
        """False when stopped during the sleep."""
        return not self.halt.wait(seconds)

    def stop(self) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(timeout=30)
        self.faults.resume_all("end of main phase")
