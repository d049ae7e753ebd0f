"""The controller's side of the clients: spawn them, read their pipes, write the history.

A client killed by the pool gets an `info` completion for its pending op
(written by the pool on its behalf: nobody knows what it did) and is
respawned under a new process id (old + concurrency) and a new generation of
values. Every child is listed in the client registry (client_registry.py)
so the next run or `lab down` kills any left behind, paused or not, and so
is each JVM a child starts for Kafka's Java client (it tells its pid). A
child leads its own process group, which holds its JVM: a kill signals the
group (ground/signals.py), so the JVM dies with the client at once.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field, replace

from ground.signals import signal_client
from workloads.client import ClientSpec, client_main
from workloads.client_registry import register_client, registry_dir, unregister_client
from workloads.completions import info_completion, left_open_sends, sends_of
from workloads.context import ClientInfo


@dataclass
class _Live:
    spec: ClientSpec
    proc: multiprocessing.Process
    conn: object
    process: int  # current logical id
    pending: dict | None = None  # last invoke without completion
    committing: int | None = None  # commit_time, once the pending txn op asked Kafka to commit
    written: int | None = None  # when the pending txn op's writes were all acknowledged
    polled: list | None = None  # poll mops the pending op received, told before it processed them
    polled_at: float = 0.0  # time.monotonic() when it told them
    jvms: list = field(default_factory=list)  # pids of the JVMs it started (Kafka's Java client)
    window_at: float | None = None  # time.monotonic() when it said it entered its window (a copier's)
    script_at: int | None = None  # the conductor's step a scripted client waits at (workloads/script.py)
    done: bool = False


class ClientPool:
    """Spawns the client processes and feeds their events to the writer."""

    def __init__(self, writer, lab_name: str, observe=None, log=print, resend: bool = False):
        self.writer = writer
        self.lab_name = lab_name
        self.resend = resend  # a replacement first sends again its predecessor's unsure sends
        self.observe = observe  # called with every recorded client event
        self.log = log
        self.mp = multiprocessing.get_context("spawn")
        self.live: dict[int, _Live] = {}
        self.lock = threading.RLock()
        self.requests: queue.Queue = queue.Queue()
        self.max_process = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="client-pool", daemon=True)
        os.makedirs(registry_dir(lab_name), exist_ok=True)
        self._thread.start()

    # -- public, thread-safe ----------------------------------------------
    def spawn(self, spec: ClientSpec) -> None:
        """Starts a client (from the pool thread, so PDEATHSIG ties it to the run)."""
        self._call(lambda: self._spawn(spec))

    def send(self, slot: int, message) -> None:
        with self.lock:
            live = self.live.get(slot)
            if live and not live.done:
                try:
                    live.conn.send(message)
                except (BrokenPipeError, OSError):
                    pass

    def pid(self, slot: int) -> int | None:
        with self.lock:
            live = self.live.get(slot)
            return live.proc.pid if live else None

    def process_of(self, slot: int) -> int | None:
        with self.lock:
            live = self.live.get(slot)
            return live.process if live else None

    def place_of(self, slot: int) -> str | None:
        """The name of the client place (namespace) the slot's client runs in, if any."""
        with self.lock:
            live = self.live.get(slot)
            return live.spec.place.name if live and live.spec.place is not None else None

    def script_step(self, slot: int) -> int | None:
        """The conductor's step a scripted client has reached and waits at; None if none."""
        with self.lock:
            live = self.live.get(slot)
            return live.script_at if live and not live.done else None

    def kill_and_replace(self, slot: int) -> tuple[int, int]:
        """SIGKILLs a client and respawns its slot as a new process; (old, new) ids."""
        return self._call(lambda: self._kill_and_replace(slot))

    def kill_process(self, process: int) -> tuple[int, int]:
        """kill_and_replace by history process id (the nemesis's client kill)."""
        with self.lock:
            slots = [slot for slot, live in self.live.items() if live.process == process and not live.done]
        if not slots:
            raise LookupError(f"no live client process {process}")
        return self.kill_and_replace(slots[0])

    def pending(self, slot: int) -> dict | None:
        """The invoke of the op the client has in flight, or None."""
        with self.lock:
            live = self.live.get(slot)
            return live.pending if live and not live.done else None

    def writes_acknowledged(self, slot: int) -> bool:
        """Whether the client's txn op in flight has had all its writes
        acknowledged and not yet asked to commit: its transaction is open."""
        with self.lock:
            live = self.live.get(slot)
            return bool(
                live
                and not live.done
                and live.pending is not None
                and live.written is not None
                and live.committing is None
            )

    def pending_sends(self, slot: int) -> list[dict]:
        """The sends of the op the client has in flight (key and value), if any."""
        with self.lock:
            live = self.live.get(slot)
            pending = live.pending if live else None
        return sends_of(pending)

    def infos(self) -> list[ClientInfo]:
        now = time.monotonic()
        with self.lock:
            return [
                ClientInfo(
                    process=live.process,
                    pid=live.proc.pid,
                    role=live.spec.role,
                    txn_id=live.spec.txn_id,
                    group=live.spec.group,
                    place=live.spec.place.name if live.spec.place is not None else None,
                    busy_s=now - live.polled_at if live.polled is not None and live.pending else None,
                    window_s=now - live.window_at if live.window_at is not None else None,
                )
                for live in self.live.values()
                if not live.done
            ]

    def alive(self) -> int:
        with self.lock:
            return sum(1 for live in self.live.values() if not live.done)

    def stop_all(self, grace_s: float = 20.0) -> None:
        """Asks every client to stop, resumes paused ones, kills stragglers."""
        with self.lock:
            lives = list(self.live.values())
        for live in lives:
            self.send(live.spec.slot, "stop")
            signal_client(live.proc.pid, signal.SIGCONT)
        end = time.monotonic() + grace_s
        while time.monotonic() < end and self.alive():
            time.sleep(0.05)
        self._call(self._kill_rest)
        self._stop.set()
        self._thread.join(timeout=10)

    # -- the pool thread ---------------------------------------------------
    def _call(self, fn):
        if threading.current_thread() is self._thread:
            return fn()
        box: dict = {}
        done = threading.Event()
        self.requests.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def _serve(self) -> None:
        while not self._stop.is_set():
            while True:
                try:
                    fn, box, done = self.requests.get_nowait()
                except queue.Empty:
                    break
                try:
                    box["result"] = fn()
                except BaseException as exc:  # handed back to the caller
                    box["error"] = exc
                done.set()
            with self.lock:
                conns = {live.conn: live for live in self.live.values() if not live.done}
            if not conns:
                time.sleep(0.02)
                continue
            for conn in multiprocessing.connection.wait(list(conns), timeout=0.02):
                self._drain_conn(conns[conn])
        # answer requests that raced with the stop
        while True:
            try:
                fn, box, done = self.requests.get_nowait()
            except queue.Empty:
                break
            box["error"] = RuntimeError("client pool stopped")
            done.set()

    def _drain_conn(self, live: _Live, limit: int = 500) -> None:
        for _ in range(limit):
            try:
                if not live.conn.poll(0):
                    return
                event = live.conn.recv()
            except (EOFError, OSError):
                self._finished(live)
                return
            self._handle(live, event)
            if live.done:
                return

    def _handle(self, live: _Live, event: dict) -> None:
        if "_process" in event:
            with self.lock:
                live.process = event["_process"]
                live.window_at = None  # the new process starts outside any window
                self.max_process = max(self.max_process, live.process)
            return
        if "_log" in event:
            self.log(event["_log"].rstrip())
            return
        if "_jvm" in event:
            register_client(self.lab_name, event["_jvm"])
            live.jvms.append(event["_jvm"])
            return
        if "_done" in event:
            self._finished(live)
            return
        if "_committing" in event:
            live.committing = event["_committing"]
            return
        if "_written" in event:
            live.written = event["_written"]
            return
        if "_script" in event:
            live.script_at = event["_script"]
            return
        if "_window" in event:
            live.window_at = time.monotonic() if event["_window"] is not None else None
            return
        if "_polled" in event:
            live.polled, live.polled_at = event["_polled"], time.monotonic()
            return
        recorded = self.writer.record(event)
        live.pending = recorded if recorded["type"] == "invoke" else None
        live.committing = live.polled = live.written = None
        if self.observe:
            self.observe(recorded)

    def _finished(self, live: _Live) -> None:
        live.done = True
        live.proc.join(timeout=5)
        if live.pending is not None:
            self._complete_for(live, "exited")
        self._unregister(live)

    def _unregister(self, live: _Live) -> None:
        for pid in [live.proc.pid, *live.jvms]:
            unregister_client(self.lab_name, pid)

    def _complete_for(self, live: _Live, why: str) -> dict:
        """Records `info` for the op a dead client left open (it may have happened)."""
        recorded = self.writer.record(info_completion(live.pending, why, live.polled, live.committing))
        live.pending = None
        live.committing = live.polled = live.written = None
        if self.observe:
            self.observe(recorded)
        return recorded

    def _spawn(self, spec: ClientSpec) -> None:
        parent, child = self.mp.Pipe(duplex=True)
        proc = self.mp.Process(
            target=client_main, args=(spec, child, os.getpid()), name=f"gregor-client-{spec.slot}", daemon=True
        )
        proc.start()
        child.close()
        register_client(self.lab_name, proc.pid)
        with self.lock:
            self.live[spec.slot] = _Live(spec, proc, parent, spec.process)
            self.max_process = max(self.max_process, spec.process)

    def _kill_and_replace(self, slot: int) -> tuple[int, int]:
        live = self.live[slot]
        closed = self._kill(live, "killed")
        unsure = left_open_sends(closed) if self.resend else []
        new_process = live.process + live.spec.stride
        extra = dict(live.spec.extra)
        extra.pop("resend", None)
        if unsure:
            extra["resend"] = unsure
        spec = replace(live.spec, process=new_process, generation=live.spec.generation + 1, extra=extra)
        self._spawn(spec)
        return live.process, new_process

    def _kill(self, live: _Live, why: str) -> dict | None:
        """SIGKILL; returns the `info` completion written for its open op, if any."""
        if live.done:
            return None
        signal_client(live.proc.pid, signal.SIGKILL)  # with its JVM, if it has one
        live.proc.join(timeout=10)
        # what it sent before dying is real: record it, then close its op
        while True:
            try:
                if not live.conn.poll(0):
                    break
                event = live.conn.recv()
            except (EOFError, OSError):
                break
            if "_done" in event:
                continue
            self._handle(live, event)
        live.done = True
        closed = self._complete_for(live, why) if live.pending is not None else None
        self._unregister(live)
        return closed

    def _kill_rest(self) -> None:
        for live in list(self.live.values()):
            if not live.done:
                self._drain_conn(live, limit=100000)
            if not live.done:
                self.log(f"client {live.process} did not stop; killing it")
                self._kill(live, "killed-at-stop")
