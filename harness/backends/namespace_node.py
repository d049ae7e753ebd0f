"""A node that is a network namespace on this host: the local backend's nodes
and every backend's client places.

Its processes run on this host (same file system, same /proc), so files are
never copied and a pid is signalled directly.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ground.errors import GregorError
from ground.procfs import proc_cmdline, proc_state
from harness.node import ExecNode

HARNESS_DIR = Path(__file__).resolve().parent.parent

# Processes started by this Python process, kept so that their exit is reaped.
_CHILDREN: dict[int, subprocess.Popen] = {}


def reap_children() -> None:
    """Reaps every process this one started that has exited since."""
    for pid in list(_CHILDREN):
        if _CHILDREN[pid].poll() is not None:
            _CHILDREN.pop(pid, None)


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.poll()
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def require_root() -> None:
    if os.geteuid() != 0:
        raise GregorError("the lab needs root (network namespaces, iptables, tc); run with sudo")


def _spawn(full: list[str], log: str, pid_file: str, env: dict | None, cwd: str | None) -> int:
    """A long-running process in a session of its own, output to `log`, pid to `pid_file`."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
    _CHILDREN[child.pid] = child
    Path(pid_file).write_text(f"{child.pid}\n")
    return child.pid


class NamespaceNode(ExecNode):
    """A node (or a client place) that is a network namespace on this host."""

    def __init__(self, name: str, address: str, home: str, namespace: str, service=None):
        super().__init__(name, address, home, service)
        self.namespace = namespace

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def exec(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 30, stdin: str | None = None
    ) -> subprocess.CompletedProcess:
        return self._run([*self.exec_prefix(), *argv], argv, check, timeout, stdin)

    def fs_exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30):
        """On this host itself: `ip netns exec` gives each command a mount
        namespace of its own, where a mount would stay unseen by the broker."""
        return self._run(list(argv), argv, check, timeout, None)

    def _run(
        self, full: list[str], argv: Sequence[str], check: bool, timeout: float, stdin: str | None
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and result.returncode != 0:
            raise GregorError(
                f"{self.name}: {' '.join(argv)} exited {result.returncode}: "
                f"{(result.stderr or result.stdout).strip()[:300]}"
            )
        return result

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 30):
        """Old name of exec (tests and scripts use it)."""
        return self.exec(argv, check=check, timeout=timeout)

    def spawn(
        self, argv: Sequence[str], *, log: str, pid_file: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> int:
        """Starts argv in the namespace, in a session of its own (Ctrl-C in the
        terminal never reaches it); `ip netns exec` execs in place, so the pid
        written to pid_file is the process's own."""
        return _spawn([*self.exec_prefix(), *argv], log, pid_file, env, cwd)

    def fs_spawn(self, argv: Sequence[str], *, log: str, pid_file: str) -> int:
        """On this host itself (see fs_exec)."""
        return _spawn(list(argv), log, pid_file, None, None)

    def upload(self, local: str, remote: str) -> None:
        copy_path(local, remote)  # same file system

    def download(self, remote: str, local: str) -> None:
        copy_path(remote, local)

    def provide(self, local_dir: str) -> str:
        return local_dir  # the node reads the controller's files where they are

    python = sys.executable  # the controller's own: the node is this host

    def tool(self, filename: str) -> list[str]:
        return [self.python, str(HARNESS_DIR / filename)]

    def netem_tag(self) -> str:
        return self.namespace  # every namespace's emulator shows in this host's /proc

    # fast paths: the same /proc and the same pids as the controller
    def _pid_and_state(self) -> tuple[int, str] | None:
        service = self._require_service()
        try:
            pid = int(Path(service.pid_file).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        state = proc_state(pid)
        if state is None:
            return None
        if state in "ZX":
            _reap(pid)
            return pid, state
        cmdline = proc_cmdline(pid)
        # An empty cmdline is a process in the middle of exec (ip netns exec -> java).
        if cmdline and not any(service.marker in arg for arg in cmdline):
            return None  # the pid was recycled by some other process
        return pid, state

    def _send(self, pid: int, sig: signal.Signals) -> bool:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False


def copy_path(source: str, target: str) -> None:
    """A file or a whole directory, copied on this host."""
    if os.path.abspath(source) == os.path.abspath(target):
        return
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, target)


def copy_node_files(source: str, target: str, skip: set[str]) -> None:
    """Copies a node's files (logs, configs) but not its bulky data."""
    if not os.path.isdir(source):
        return
    os.makedirs(target, exist_ok=True)
    for entry in os.listdir(source):
        if entry in skip:
            continue
        path = os.path.join(source, entry)
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(target, entry), dirs_exist_ok=True)
        elif os.path.isfile(path):
            shutil.copyfile(path, os.path.join(target, entry))
