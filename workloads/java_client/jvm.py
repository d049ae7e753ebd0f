"""The JVM of a client process: Gregor's driver, JSON lines over its stdin and stdout.

A client process (one logical Gregor client) starts one driver JVM the first
time it builds a Producer or Consumer, and keeps it for every producer and
consumer it builds after (a replaced transactional producer is a new handle
in the same JVM). The JVM is part of the client process for every fault:

- it stays in the client's process group (workloads/client.py makes each
  client a group leader), so that a pause, a kill-client or a crashed run's
  cleanup, which signal the group, stop or kill both at once;
- whoever configured this module is told its pid (`configure(on_start=...)`):
  the client pool lists it in the lab's client registry;
- it dies with the client: PR_SET_PDEATHSIG (set between fork and exec, so a
  SIGKILL of the client kills it at once), and the driver's own watch of its
  parent and of its stdin for any other exit;
- it inherits the client's network namespace, which the client entered
  before it built anything (--client-netns).

Requests with a reply are answered strictly in order; `produce` lines have
no reply, so a burst of sends costs one pipe write each and no round trip.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import threading
from typing import Callable

from workloads.java_client import build
from workloads.java_client.kafka_types import KafkaError, KafkaException

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class DriverGone(KafkaException):
    """The JVM died (killed, or crashed): whatever it had in flight has an unknown outcome."""


class Driver:
    """One running driver JVM."""

    def __init__(self, client: build.JavaClient, argv: list[str] | None = None):
        self.client = client
        # PR_SET_PDEATHSIG fires when the forking THREAD ends, so only the main thread's
        # children get it; the driver's parent watch ends the others within 100 ms.
        main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            argv or client.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=_die_with_parent if main else None,
            close_fds=True,
        )
        self.lock = threading.RLock()
        self.next_id = 0
        self.next_handle = 0
        self.later: list[dict] = []  # requests queued by finalizers, sent before the next call
        hello = self._read()
        self.pid = int(hello["pid"])
        self.version = hello["version"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def handle(self) -> int:
        with self.lock:
            self.next_handle += 1
            return self.next_handle

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.poll()
            raise DriverGone(KafkaError(KafkaError._DESTROY, f"the Java client's JVM exited ({self.proc.returncode})"))
        return json.loads(line)

    def _write(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise DriverGone(KafkaError(KafkaError._DESTROY, "the Java client's JVM is gone")) from None

    def send(self, message: dict) -> None:
        """A request without a reply (produce)."""
        with self.lock:
            self._write(message)

    def request(self, op: str, **fields) -> dict:
        """Sends one request and returns its reply (ok or not)."""
        with self.lock:
            while self.later:
                self._write(self.later.pop(0))
            self.next_id += 1
            self._write({"id": self.next_id, "op": op, **fields})
            reply = self._read()
            if reply.get("id") != self.next_id:
                raise DriverGone(KafkaError(KafkaError._FAIL, f"driver answered {reply.get('id')} to {self.next_id}"))
            return reply

    def defer(self, message: dict) -> None:
        """Queued from a finalizer (which may run inside another request): sent before the next one."""
        self.later.append(message)

    def stop(self) -> None:
        try:
            self._write({"op": "exit"})
        except DriverGone:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Process:
    """This process's JVM and what it was configured with."""

    driver: Driver | None = None
    owner: int | None = None  # the pid that started it (a forked child starts its own)
    version: str | None = None
    on_start: Callable[[int], None] | None = None


_this = _Process()
_lock = threading.Lock()


def configure(version: str | None = None, on_start: Callable[[int], None] | None = None) -> None:
    """The kafka-clients version of this process's JVM (None: the newest), and who is
    told the pid of each JVM it starts."""
    _this.version, _this.on_start = version, on_start


def driver() -> Driver:
    """This process's JVM, started on first use (and again after it died)."""
    with _lock:
        if _this.driver is None or _this.owner != os.getpid() or not _this.driver.alive():
            _this.driver = Driver(build.install(_this.version, progress=lambda line: None))
            _this.owner = os.getpid()
            if _this.on_start is not None:
                _this.on_start(_this.driver.pid)
        return _this.driver


def current() -> Driver | None:
    """The JVM already running in this process, if any."""
    return _this.driver if _this.driver is not None and _this.owner == os.getpid() else None


def stop() -> None:
    """Ends this process's JVM (a client's close; its death would end it too)."""
    with _lock:
        if current() is not None:
            _this.driver.stop()
        _this.driver = None
