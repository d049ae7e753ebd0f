"""The local backend: one Linux network namespace per node, on one bridge.

The embedded default: no daemon, no VM. Each node is a namespace with eth0
on the lab's bridge and a fixed address; its processes run on this host
(same file system, same /proc), so files are never copied and a pid is
signalled directly. Client places are namespaces on the same bridge.

Layout (lab L, nodes n1..nN):
  /var/lib/gregor/labs/L/<node>/   the node's home (configs, data, logs)
  namespaces L-n1.., L-<client>    each with eth0 on bridge L-br
  subnet 10.a.b.0/24 from the name bridge .1, node i at .(10+i), clients .100+
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from harness.backends import netns
from harness.backends.bridge_places import BridgePlaces, remove_namespaces
from harness.errors import GregorError
from harness.node import ExecNode
from harness.paths import labs_dir
from harness.procfs import proc_cmdline, proc_state
from harness.protocols import NODE_FAULTS, POWER_LOSS

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
        child = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, cwd=cwd, env={**os.environ, **env} if env else None)
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

    def exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30,
             stdin: str | None = None) -> subprocess.CompletedProcess:
        return self._run([*self.exec_prefix(), *argv], argv, check, timeout, stdin)

    def fs_exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30):
        """On this host itself: `ip netns exec` gives each command a mount
        namespace of its own, where a mount would stay unseen by the broker."""
        return self._run(list(argv), argv, check, timeout, None)

    def _run(self, full: list[str], argv: Sequence[str], check: bool, timeout: float,
             stdin: str | None) -> subprocess.CompletedProcess:
        result = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and result.returncode != 0:
            raise GregorError(f"{self.name}: {' '.join(argv)} exited {result.returncode}: "
                              f"{(result.stderr or result.stdout).strip()[:300]}")
        return result

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 30):
        """Old name of exec (tests and scripts use it)."""
        return self.exec(argv, check=check, timeout=timeout)

    def spawn(self, argv: Sequence[str], *, log: str, pid_file: str,
              env: dict[str, str] | None = None, cwd: str | None = None) -> int:
        """Starts argv in the namespace, in a session of its own (Ctrl-C in the
        terminal never reaches it); `ip netns exec` execs in place, so the pid
        written to pid_file is the process's own."""
        return _spawn([*self.exec_prefix(), *argv], log, pid_file, env, cwd)

    def fs_spawn(self, argv: Sequence[str], *, log: str, pid_file: str) -> int:
        """On this host itself (see fs_exec)."""
        return _spawn(list(argv), log, pid_file, None, None)

    def upload(self, local: str, remote: str) -> None:
        copy_path(local, remote)   # same file system

    def download(self, remote: str, local: str) -> None:
        copy_path(remote, local)

    def provide(self, local_dir: str) -> str:
        return local_dir   # the node reads the controller's files where they are

    python = sys.executable   # the controller's own: the node is this host

    def tool(self, filename: str) -> list[str]:
        return [self.python, str(HARNESS_DIR / filename)]

    def netem_tag(self) -> str:
        return self.namespace   # every namespace's emulator shows in this host's /proc

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
            return None   # the pid was recycled by some other process
        return pid, state

    def _send(self, pid: int, sig: signal.Signals) -> bool:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False


class LocalBackend(BridgePlaces):
    """Network namespaces on this host."""

    name = "local"
    faults = frozenset(NODE_FAULTS) | {POWER_LOSS}   # nodes share this host's FUSE (/dev/fuse)

    def can_look_without_starting(self) -> bool:
        return os.geteuid() == 0

    def check(self) -> None:
        require_root()
        for tool in ("ip", "iptables", "tc", "ss"):
            if shutil.which(tool) is None:
                raise GregorError(f"'{tool}' not found; install iproute2 and iptables (run ./setup)")

    def provision(self, lab: str, names: list[str], progress) -> dict:
        subnet = netns.lab_subnet(lab)
        holder = netns.subnet_in_use(subnet, except_dev=netns.bridge_name(lab))
        if holder is not None:
            raise GregorError(f"subnet {subnet} of lab {lab!r} is already used by {holder}; choose another --lab name")
        hosts = list(subnet.hosts())
        state = {"subnet": str(subnet), "bridge_ip": str(hosts[0]), "lab_dir": str(labs_dir() / lab),
                 "nodes": [{"name": name, "address": str(hosts[10 + i])} for i, name in enumerate(names)],
                 "clients": {}}
        progress(f"lab {lab}: bridge {netns.bridge_name(lab)} {state['bridge_ip']}/{subnet.prefixlen}, "
                 f"{len(names)} namespaces")
        kill_processes_under(Path(state["lab_dir"]))   # an older crashed lab's processes hold its files
        unmount_under(Path(state["lab_dir"]))
        shutil.rmtree(state["lab_dir"], ignore_errors=True)
        netns.create_bridge(lab, state["bridge_ip"], subnet.prefixlen)
        netns.bridge_forwarding(netns.bridge_name(lab), allow=True)
        for node in self.nodes(lab, state):
            netns.create_member(lab, node.name, node.address, subnet.prefixlen, state["bridge_ip"])
            Path(node.home).mkdir(parents=True, exist_ok=True)
            node.prepare_network()
        return state

    def nodes(self, lab: str, state: dict) -> list[NamespaceNode]:
        return [NamespaceNode(n["name"], n["address"], os.path.join(state["lab_dir"], n["name"]),
                              netns.ns_name(lab, n["name"])) for n in state["nodes"]]

    def collect(self, lab: str, state: dict, node, local_dir: str) -> None:
        _copy_tree(node.home, local_dir, skip={"data", "disk"})   # disk: powerfs's copy of data

    def teardown(self, lab: str, state: dict | None, progress) -> list[str]:
        require_root()
        lab_dir = Path((state or {}).get("lab_dir") or labs_dir() / lab)
        done = []
        killed = kill_processes_under(lab_dir)
        if killed:
            done.append(f"{killed} processes killed")
        unmounted = unmount_under(lab_dir)
        if unmounted:
            done.append(f"{unmounted} powerfs mounts removed")
        spaces = remove_namespaces(lab)
        if spaces:
            done.append(f"{spaces} namespaces removed")
        netns.bridge_forwarding(netns.bridge_name(lab), allow=False)
        netns.delete_bridge(lab)
        if lab_dir.exists():
            shutil.rmtree(lab_dir, ignore_errors=True)
            done.append(f"{lab_dir} removed")
        return done

    def leftovers(self, lab: str) -> list[str]:
        prefix = f"{lab}-"
        found = [f"namespace {ns}" for ns in netns.namespaces() if ns.startswith(prefix)]
        found += [f"link {link}" for link in netns.links_with_prefix(prefix)]
        marker = f"{labs_dir() / lab}/"
        found += [f"process {pid}" for pid in _pids_with(marker)]
        found += [f"mount {point}" for point in mounts_under(labs_dir() / lab)]
        if (labs_dir() / lab).exists():
            found.append(f"dir {labs_dir() / lab}")
        return found

    def busy(self, lab: str) -> bool:
        """Whether anything of a lab of this name exists (up, or left by a crash)."""
        return bool([ns for ns in netns.namespaces() if ns.startswith(f"{lab}-")]) \
            or netns.link_exists(netns.bridge_name(lab))


def _pids_with(marker: str) -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and int(entry.name) != os.getpid()
            and any(marker in arg for arg in proc_cmdline(int(entry.name)))]


def kill_processes_under(directory: Path) -> int:
    """SIGKILLs every process whose command line points into `directory`."""
    marker = f"{directory}/"
    killed = 0
    for pid in _pids_with(marker):
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 10
    while killed and _pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)   # a dead process has an empty cmdline (zombie) or none at all
    reap_children()
    return killed


def mounts_under(directory: Path) -> list[str]:
    """Mount points inside `directory` (powerfs mounts of a lab's nodes), deepest first."""
    prefix = f"{directory}/"
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def unmount_under(directory: Path) -> int:
    """Lazily unmounts every mount inside `directory` (their daemons may be dead
    already: a dead FUSE mount would keep the directory from being removed)."""
    points = mounts_under(directory)
    for point in points:
        subprocess.run(["umount", "-l", point], capture_output=True)
    return len(points)


def copy_path(source: str, target: str) -> None:
    """A file or a whole directory, copied on this host."""
    if os.path.abspath(source) == os.path.abspath(target):
        return
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, target)


def _copy_tree(source: str, target: str, skip: set[str]) -> None:
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
