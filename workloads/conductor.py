"""Faults a workload itself inflicts on its own clients (pause, kill).

The zombie and group workloads need a client paused or killed at a moment
of their choosing. Each action is recorded exactly like a nemesis op
(process "nemesis", an invoke and an `info` completion saying what was done)
so checkers and reports see it beside the nemesis's own faults.
"""

from __future__ import annotations

import os
import signal
import threading
import time


class ClientFaults:
    """Pauses, resumes and kills client processes of a ClientPool, recorded."""

    def __init__(self, pool, record):
        self.pool = pool
        self.record = record
        self.paused: dict[int, int] = {}     # slot -> pid
        self.lock = threading.Lock()

    def pause(self, slot: int, why: str, **extra) -> bool:
        pid, process = self.pool.pid(slot), self.pool.process_of(slot)
        if pid is None:
            return False
        self.record({"process": "nemesis", "type": "invoke", "f": "pause",
                     "value": {"clients": [process], "why": why, **extra}})
        try:
            os.kill(pid, signal.SIGSTOP)
            done = {"paused": [process], "pids": [pid], "why": why, **extra}
            with self.lock:
                self.paused[slot] = pid
        except ProcessLookupError:
            done = {"paused": [], "why": why, "gone": [process]}
        self.record({"process": "nemesis", "type": "info", "f": "pause", "value": done})
        return bool(done["paused"])

    def resume(self, slot: int, why: str) -> None:
        with self.lock:
            pid = self.paused.pop(slot, None)
        if pid is None:
            return
        process = self.pool.process_of(slot)
        self.record({"process": "nemesis", "type": "invoke", "f": "resume",
                     "value": {"clients": [process], "why": why}})
        try:
            os.kill(pid, signal.SIGCONT)
            done = {"resumed": [process], "pids": [pid], "why": why}
        except ProcessLookupError:
            done = {"resumed": [], "gone": [process], "why": why}
        self.record({"process": "nemesis", "type": "info", "f": "resume", "value": done})

    def resume_all(self, why: str) -> None:
        with self.lock:
            slots = list(self.paused)
        for slot in slots:
            self.resume(slot, why)

    def kill(self, slot: int, why: str) -> None:
        process = self.pool.process_of(slot)
        self.record({"process": "nemesis", "type": "invoke", "f": "kill-client",
                     "value": {"clients": [process], "why": why}})
        with self.lock:
            self.paused.pop(slot, None)
        old, new = self.pool.kill_and_replace(slot)
        self.record({"process": "nemesis", "type": "info", "f": "kill-client",
                     "value": {"killed": [old], "replaced_by": new, "why": why}})


class Conductor(threading.Thread):
    """A background schedule of client faults; stop() heals what it did."""

    def __init__(self, faults: ClientFaults, name: str, deadline: float | None = None):
        super().__init__(name=name, daemon=True)
        self.faults = faults
        self.halt = threading.Event()
        self.deadline = deadline          # time.monotonic() at which the main phase ends

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
