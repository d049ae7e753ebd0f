"""One lab node in its own network namespace: its broker process and its links.

The broker is started in a new session so that Ctrl-C in the terminal that
ran `gregor lab up` never reaches it, and its pid goes into a pid file so
any later process (`Lab.attach`, `lab down`) finds it again. A pid is only
trusted while /proc says that process still runs this node's config, so a
recycled pid is never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import netns
from harness.errors import GregorError
from harness.kafka_config import BROKER_PORT, CONTROLLER_PORT
from harness.procfs import proc_cmdline, proc_state  # noqa: F401  (lab.py and tests import them from here)

# Brokers started by this Python process, kept so that their exit is reaped.
_CHILDREN: dict[int, subprocess.Popen] = {}


def reap(pid: int) -> None:
    """Collects a dead child so it does not linger as a zombie."""
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.poll()
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def reap_children() -> None:
    """Reaps every broker this process started that has exited since."""
    for pid in list(_CHILDREN):
        if _CHILDREN[pid].poll() is not None:
            _CHILDREN.pop(pid, None)


@dataclass
class Node:
    """A Kafka node of a local lab; the same calls the nemesis uses on any backend."""

    name: str
    ip: str
    broker_id: int
    namespace: str
    node_dir: Path
    classpath: str
    jvm_opts: list[str] = field(default_factory=list)

    @property
    def config_path(self) -> Path:
        return self.node_dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.node_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.node_dir / "broker.log"

    @property
    def pid_path(self) -> Path:
        return self.node_dir / "broker.pid"

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    # --- commands ---------------------------------------------------------
    def run(self, cmd: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """Runs `cmd` inside this node's namespace and returns its output."""
        result = subprocess.run([*self.exec_prefix(), *cmd], capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise GregorError(
                f"{self.name}: {' '.join(cmd)} exited {result.returncode}: "
                f"{(result.stderr or result.stdout).strip()[:300]}"
            )
        return result

    # --- the broker process ------------------------------------------------
    def pid(self) -> int | None:
        """The broker JVM's pid while it exists (running or paused), else None."""
        try:
            pid = int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        state = proc_state(pid)
        if state is None or state in "ZX":
            if state is not None:
                reap(pid)
            return None
        cmdline = proc_cmdline(pid)
        # An empty cmdline is a process in the middle of exec (ip netns exec -> java).
        if cmdline and str(self.config_path) not in cmdline:
            return None  # the pid was recycled by some other process
        return pid

    def state(self) -> str:
        """"running", "paused" (SIGSTOPped, state T) or "dead"."""
        pid = self.pid()
        if pid is None:
            return "dead"
        return "paused" if proc_state(pid) in ("T", "t") else "running"

    def _port_holder(self) -> str | None:
        """What already listens on the broker or controller port here, if anything."""
        out = self.run(["ss", "-Htlnp"], check=False).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 4:
                continue
            port = parts[3].rsplit(":", 1)[-1]
            if port in (str(BROKER_PORT), str(CONTROLLER_PORT)):
                return f"port {port} (held by {' '.join(parts[5:]) or 'another process'})"
        return None

    def start(self) -> int:
        """Starts the broker unless it is already up; returns its pid."""
        pid = self.pid()
        if pid is not None:
            return pid
        holder = self._port_holder()
        if holder is not None:
            raise GregorError(
                f"{self.name} ({self.ip}): {holder} is already in use; stop that process "
                f"or run gregor lab down first"
            )
        with open(self.log_path, "ab") as log:
            child = subprocess.Popen(
                [*self.exec_prefix(), "java", *self.jvm_opts, "-cp", self.classpath,
                 "kafka.Kafka", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # `ip netns exec` execs java in place, so this pid is the JVM's.
        _CHILDREN[child.pid] = child
        self.pid_path.write_text(f"{child.pid}\n")
        return child.pid

    def _signal(self, sig: int) -> int | None:
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return None
        return pid

    def _wait_dead(self, timeout: float) -> bool:
        """Waits until the JVM is gone and so are its listening sockets: a
        multi-threaded process shows as a zombie while its other threads still
        exit and hold the ports, and a restart right then would find them taken."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                break
            time.sleep(0.05)
        else:
            return self.pid() is None
        while self._port_holder() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM and wait for a clean shutdown; SIGKILL if it takes too long."""
        if self._signal(signal.SIGCONT) is None:
            return
        self._signal(signal.SIGTERM)
        if not self._wait_dead(timeout):
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the broker dies at once, nothing flushed."""
        if self._signal(signal.SIGKILL) is not None and not self._wait_dead(10):
            raise GregorError(f"{self.name}: broker survived SIGKILL for 10 s (pid {self.pid()})")

    def pause(self) -> None:
        """SIGSTOP the JVM: a zombie broker that still looks alive to its peers' sockets."""
        if self._signal(signal.SIGSTOP) is None:
            raise GregorError(f"{self.name}: cannot pause, the broker is not running")
        deadline = time.monotonic() + 5
        while self.state() != "paused" and time.monotonic() < deadline:
            time.sleep(0.02)

    def resume(self) -> None:
        """SIGCONT the JVM (a no-op if it is not paused)."""
        self._signal(signal.SIGCONT)
        deadline = time.monotonic() + 5
        while self.state() == "paused" and time.monotonic() < deadline:
            time.sleep(0.02)

    # --- network faults ---------------------------------------------------
    def drop_from(self, ips) -> None:
        """Drop every packet arriving from these addresses (one-way cut)."""
        netns.drop(self.namespace, "in", [str(ip) for ip in _as_list(ips)])

    def drop_to(self, ips) -> None:
        """Drop every packet this node sends to these addresses (one-way cut)."""
        netns.drop(self.namespace, "out", [str(ip) for ip in _as_list(ips)])

    def heal_network(self) -> None:
        netns.flush_chains(self.namespace)

    def netem(self, spec: str) -> str:
        """tc netem on the node's interface, e.g. "delay 100ms 20ms loss 5%";
        returns whether the qdisc or its emulation applied it."""
        return netns.set_netem(self.namespace, spec)

    def clear_netem(self) -> None:
        netns.clear_netem(self.namespace)


def _as_list(ips) -> list:
    """Addresses from one address, a list of them, or objects with an `ip` (nodes, clients)."""
    items = [ips] if isinstance(ips, str) or hasattr(ips, "ip") else list(ips)
    return [getattr(item, "ip", item) for item in items]
