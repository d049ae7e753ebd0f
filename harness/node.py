"""The Node every backend shares: the system's process and the network faults,
built on four primitives a backend provides (exec, spawn, upload, download).

So a pause is the same SIGSTOP, a cut the same iptables rule and a netem
the same qdisc or emulation whether the node is a namespace, a container or
an SSH host; a backend only says how to run a command there. A backend may
override a method with a faster path (the local backend reads /proc
directly), never with other semantics.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Iterable, Sequence

from ground.errors import GregorError
from ground.protocols import NodeState, Service
from harness import netfaults

# Prints "<pid> <state letter>" of the service, or nothing when it is not running.
# $1 pid file, $2 marker: a pid whose command line lacks the marker was recycled.
_PID_SCRIPT = r"""
read pid < "$1" 2>/dev/null || exit 0
case "$pid" in ''|*[!0-9]*) exit 0;; esac
stat=$(cat "/proc/$pid/stat" 2>/dev/null) || exit 0
cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
if [ -n "$cmd" ]; then
  case "$cmd" in *"$2"*) ;; *) exit 0;; esac
fi
rest=${stat##*) }
echo "$pid ${rest%% *}"
"""


class ExecNode:
    """A node of any backend; subclasses provide exec, spawn, upload, download."""

    device = "eth0"  # the interface faults act on
    python = "python3"  # the node's Python, for our node-side tools

    def __init__(self, name: str, address: str, home: str, service: Service | None = None):
        self.name = name
        self.address = address
        self.home = home
        self.service = service

    # --- primitives a backend provides -------------------------------------------
    def exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30, stdin: str | None = None):
        raise NotImplementedError

    def spawn(
        self, argv: Sequence[str], *, log: str, pid_file: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> int:
        raise NotImplementedError

    def upload(self, local: str, remote: str) -> None:
        raise NotImplementedError

    def download(self, remote: str, local: str) -> None:
        raise NotImplementedError

    def provide(self, local_dir: str) -> str:
        """Where a controller directory (read-only content such as jars) is
        readable on the node; by default it is uploaded into our home."""
        remote = f"{self.home}/files/{local_dir.rstrip('/').rsplit('/', 1)[-1]}"
        self.upload(local_dir, remote)
        return remote

    def tool(self, filename: str) -> list[str]:
        """The command that runs one of our node-side Python tools (harness/<filename>)."""
        return [self.python, f"{self.home}/tools/{filename}"]

    # --- small helpers on top of exec ----------------------------------------------
    def write_text(self, path: str, text: str) -> None:
        self.exec(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", path], stdin=text)

    def read_text(self, path: str) -> str | None:
        result = self.exec(["cat", path], check=False)
        return result.stdout if result.returncode == 0 else None

    def await_log(self, path: str, ready, timeout: float, every: float, failed=lambda text: False):
        """What `ready(text)` makes of a spawned tool's log once it is truthy (the tool is up),
        or None when `failed(text)` or the timeout says it will not be: the caller cleans up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.read_text(path) or ""
            found = ready(text)
            if found:
                return found
            if failed(text):
                break
            time.sleep(every)
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name} {self.address})"

    @property
    def label(self) -> str:
        """How messages name the node: its name, plus where it is when that is
        not this host (an SSH node says user@host:port)."""
        return self.name

    # --- the system's process -----------------------------------------------------
    def _require_service(self) -> Service:
        if self.service is None:
            raise GregorError(f"{self.name}: no system process is deployed on this node")
        return self.service

    def _pid_and_state(self) -> tuple[int, str] | None:
        service = self._require_service()
        out = self.exec(["sh", "-c", _PID_SCRIPT, "sh", service.pid_file, service.marker], check=False).stdout.split()
        if len(out) != 2:
            return None
        return int(out[0]), out[1]

    def pid(self) -> int | None:
        """The service's pid while it exists (running or paused), else None."""
        found = self._pid_and_state()
        if found is None or found[1] in ("Z", "X"):
            return None
        return found[0]

    def state(self) -> NodeState:
        """ "running", "paused" (SIGSTOPped, state T) or "dead"."""
        found = self._pid_and_state()
        if found is None or found[1] in ("Z", "X"):
            return "dead"
        return "paused" if found[1] in ("T", "t") else "running"

    def _send(self, pid: int, sig: signal.Signals) -> bool:
        """Delivers a signal to a pid on the node; False if it is gone."""
        return self.exec(["kill", "-s", sig.name[3:], str(pid)], check=False).returncode == 0

    def _signal(self, sig: signal.Signals) -> int | None:
        pid = self.pid()
        if pid is not None and not self._send(pid, sig):
            return None
        return pid

    def port_holder(self) -> str | None:
        """What already listens on one of the service's ports here, if anything."""
        ports = {str(p) for p in self._require_service().ports}
        if not ports:
            return None
        out = self.exec(["ss", "-Htlnp"], check=False).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[3].rsplit(":", 1)[-1] in ports:
                return f"port {parts[3].rsplit(':', 1)[-1]} (held by {' '.join(parts[5:]) or 'another process'})"
        return None

    def start(self) -> int:
        """Starts the service unless it is already up; returns its pid."""
        service = self._require_service()
        pid = self.pid()
        if pid is not None:
            return pid
        holder = self.port_holder()
        if holder is not None:
            raise GregorError(
                f"{self.name} ({self.address}): {holder} is already in use; stop that "
                "process or run gregor lab down first"
            )
        return self.spawn(
            service.argv, log=service.log, pid_file=service.pid_file, env=dict(service.env), cwd=service.cwd
        )

    def _wait_dead(self, timeout: float) -> bool:
        """Waits until the process is gone and so are its listening sockets: a
        multi-threaded process shows as a zombie while its other threads still
        exit and hold the ports, and a restart right then would find them taken."""
        deadline = time.monotonic() + timeout
        while self.pid() is not None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        while self.port_holder() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM and wait for a clean shutdown (SIGCONT first: a paused
        process cannot handle SIGTERM); SIGKILL if it takes too long."""
        if self._signal(signal.SIGCONT) is None:
            return
        self._signal(signal.SIGTERM)
        if not self._wait_dead(timeout):
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the process dies at once, nothing flushed."""
        if self._signal(signal.SIGKILL) is not None and not self._wait_dead(10):
            raise GregorError(f"{self.name}: the system process survived SIGKILL for 10 s (pid {self.pid()})")

    def pause(self) -> None:
        """SIGSTOP: a zombie that still looks alive to its peers' sockets."""
        if self._signal(signal.SIGSTOP) is None:
            raise GregorError(f"{self.name}: cannot pause, the system process is not running")
        self._await_state("paused", True)

    def resume(self) -> None:
        """SIGCONT (a no-op if it is not paused)."""
        self._signal(signal.SIGCONT)
        self._await_state("paused", False)

    def _await_state(self, state: str, present: bool, timeout: float = 5) -> None:
        """Signal delivery is asynchronous: wait until the node shows it."""
        deadline = time.monotonic() + timeout
        while (self.state() == state) != present and time.monotonic() < deadline:
            time.sleep(0.02)

    # --- storage that can lose power (harness/powerfs.py) ---------------------------
    def fs_exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30):
        """Runs a command where the node's mounts are made and seen (the node itself)."""
        return self.exec(argv, check=check, timeout=timeout)

    def fs_spawn(self, argv: Sequence[str], *, log: str, pid_file: str) -> int:
        return self.spawn(argv, log=log, pid_file=pid_file)

    def powerfs_files(self) -> dict[str, str]:
        """Where powerfs keeps the node's real data (`disk`), its control socket and its log."""
        return {
            "backing": f"{self.home}/disk",
            "control": f"{self.home}/powerfs.sock",
            "log": f"{self.home}/powerfs.log",
            "pid_file": f"{self.home}/powerfs.pid",
        }

    def powerfs_mounted(self, mount: str) -> bool:
        return (
            self.fs_exec([*self.tool("powerfs.py"), "wait", "--mount", mount, "--timeout", "0"], check=False).returncode
            == 0
        )

    def mount_powerfs(self, mount: str, timeout: float = 20) -> bool:
        """Serves the directory `mount` from powerfs (the first time, its content
        becomes powerfs's disk); True if it had to be mounted, False if it was."""
        if self.powerfs_mounted(mount):
            return False
        files = self.powerfs_files()
        tool = self.tool("powerfs.py")
        self.fs_spawn(
            [*tool, "serve", "--mount", mount, "--backing", files["backing"], "--control", files["control"]],
            log=files["log"],
            pid_file=files["pid_file"],
        )
        waited = self.fs_exec(
            [*tool, "wait", "--mount", mount, "--timeout", str(timeout)], check=False, timeout=timeout + 15
        )
        if waited.returncode != 0:
            raise GregorError(
                f"{self.name}: powerfs did not come up at {mount} in {timeout:g} s; its log is {files['log']}"
            )
        return True

    def lose_unsynced(self, mount: str) -> dict:
        """The power cut of the storage under `mount`: every file loses what was
        never fsynced, and the mount goes away (mount_powerfs brings it back).
        The system's process must already be dead. Returns powerfs's report:
        {"files": [{"file", "size", "kept", "lost_bytes", ...}], "lost_bytes"}."""
        files = self.powerfs_files()
        out = self.fs_exec(
            [*self.tool("powerfs.py"), "cut", "--mount", mount, "--control", files["control"]], timeout=120
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    # --- the network --------------------------------------------------------------
    def prepare_network(self) -> None:
        """Our iptables chains, before any fault needs them."""
        netfaults.install_chains(self)

    def drop_from(self, addresses: Iterable[str], port: int | None = None) -> None:
        """Drop every packet arriving from these addresses (one-way cut); with
        `port`, only those to that TCP port of this node."""
        netfaults.drop(self, "in", addresses_of(addresses), port=port)

    def drop_to(self, addresses: Iterable[str]) -> None:
        """Drop every packet this node sends to these addresses (one-way cut)."""
        netfaults.drop(self, "out", addresses_of(addresses))

    def heal_network(self) -> None:
        netfaults.flush(self)

    def netem_tag(self) -> str:
        """Names this node's netem emulator (unique on the machine it runs on)."""
        return self.name

    def netem(self, spec: str) -> str:
        """tc netem on the node's interface, e.g. "delay 100ms 20ms loss 5%";
        returns whether the qdisc or its emulation applied it."""
        return netfaults.set_netem(self, self.device, spec, self.netem_tag())

    def clear_netem(self) -> None:
        netfaults.clear_netem(self, self.device, self.netem_tag())


def addresses_of(items) -> list[str]:
    """Addresses from one address, a list of them, or objects with an `address`."""
    items = [items] if isinstance(items, str) or hasattr(items, "address") else list(items)
    return [str(getattr(item, "address", item)) for item in items]
