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

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ground.errors import GregorError
from ground.faults import NODE_FAULTS, POWER_LOSS, WIRE
from ground.paths import labs_dir
from ground.procfs import proc_cmdline
from harness.backends import netns, routed_places
from harness.backends.bridge_places import BridgePlaces, remove_namespaces
from harness.backends.namespace_node import (
    NamespaceNode,
    copy_node_files,
    reap_children,  # noqa: F401
    require_root,
)


class LocalBackend(BridgePlaces):
    """Network namespaces on this host."""

    name = "local"
    # nodes share this host's FUSE (/dev/fuse) and its wire relay (which enters their namespaces)
    faults = frozenset(NODE_FAULTS) | {POWER_LOSS, WIRE}

    def can_look_without_starting(self) -> bool:
        return os.geteuid() == 0

    def check(self) -> None:
        require_root()
        for tool in ("ip", "iptables", "tc", "ss", "findmnt"):
            if shutil.which(tool) is None:
                raise GregorError(f"'{tool}' not found; install iproute2 and iptables (run ./setup)")

    def provision(self, lab: str, names: list[str], progress) -> dict:
        subnet = netns.lab_subnet(lab)
        holder = netns.subnet_in_use(subnet, except_dev=netns.bridge_name(lab))
        if holder is not None:
            raise GregorError(f"subnet {subnet} of lab {lab!r} is already used by {holder}; choose another --lab name")
        hosts = list(subnet.hosts())
        state = {
            "subnet": str(subnet),
            "bridge_ip": str(hosts[0]),
            "lab_dir": str(labs_dir() / lab),
            "nodes": [{"name": name, "address": str(hosts[10 + i])} for i, name in enumerate(names)],
            "clients": {},
        }
        progress(
            f"lab {lab}: bridge {netns.bridge_name(lab)} {state['bridge_ip']}/{subnet.prefixlen}, "
            f"{len(names)} namespaces"
        )
        kill_processes_under(Path(state["lab_dir"]))  # an older crashed lab's processes hold its files
        unmount_under(Path(state["lab_dir"]))
        shutil.rmtree(state["lab_dir"], ignore_errors=True)
        netns.create_bridge(lab, state["bridge_ip"], subnet.prefixlen)
        netns.bridge_forwarding(netns.bridge_name(lab), allow=True)
        for node in self.nodes(lab, state):
            netns.create_member(lab, node.name, node.address, subnet.prefixlen, state["bridge_ip"])
            Path(node.home).mkdir(parents=True, exist_ok=True)
            node.prepare_network()
        if not names:  # a lab of clients only (an external cluster): they must reach out of the bridge
            Path(state["lab_dir"]).mkdir(parents=True, exist_ok=True)
            routed_places.open_routes(lab)
        return state

    def nodes(self, lab: str, state: dict) -> list[NamespaceNode]:
        return [
            NamespaceNode(
                n["name"], n["address"], os.path.join(state["lab_dir"], n["name"]), netns.ns_name(lab, n["name"])
            )
            for n in state["nodes"]
        ]

    def collect(self, lab: str, state: dict, node, local_dir: str) -> None:
        copy_node_files(node.home, local_dir, skip={"data", "disk"})  # disk: powerfs's copy of data

    def stale(self, lab: str, state: dict, local_only: bool = False) -> str | None:
        """Gone when a node's namespace or the lab's bridge is (all on this host: no packet sent)."""
        return missing_namespaces(lab, state)

    def teardown(self, lab: str, state: dict | None, progress, machines_gone: bool = False) -> list[str]:
        """Everything is on this host, so it is all removed also when the lab is stale."""
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
        if routed_places.close_routes(lab):
            done.append("routes out removed")
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
        return bool([ns for ns in netns.namespaces() if ns.startswith(f"{lab}-")]) or netns.link_exists(
            netns.bridge_name(lab)
        )


def missing_namespaces(lab: str, state: dict) -> str | None:
    """What of a local lab's network is gone: its nodes' namespaces, its bridge."""
    present = set(netns.namespaces())
    gone = [netns.ns_name(lab, n["name"]) for n in state["nodes"] if netns.ns_name(lab, n["name"]) not in present]
    if gone:
        return f"namespaces gone: {', '.join(gone)}"
    if not netns.link_exists(netns.bridge_name(lab)):
        return f"bridge gone: {netns.bridge_name(lab)}"
    return None


def _pids_with(marker: str) -> list[int]:
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and int(entry.name) != os.getpid()
        and any(marker in arg for arg in proc_cmdline(int(entry.name)))
    ]


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
        time.sleep(0.05)  # a dead process has an empty cmdline (zombie) or none at all
    reap_children()
    return killed


def mounts_under(directory: Path) -> list[str]:
    """Mount points inside `directory` (powerfs mounts of a lab's nodes), deepest first."""
    prefix = f"{directory}/"
    # findmnt (util-linux) decodes mountinfo's escapes itself: spaces, tabs, newlines, backslashes
    listed = subprocess.run(
        ["findmnt", "--json", "--list", "--output", "TARGET"], capture_output=True, text=True, timeout=30
    )
    try:
        found = json.loads(listed.stdout or "{}").get("filesystems", [])
    except ValueError:
        found = []
    points = [entry["target"] for entry in found if str(entry.get("target", "")).startswith(prefix)]
    return sorted(points, key=len, reverse=True)


def unmount_under(directory: Path) -> int:
    """Lazily unmounts every mount inside `directory` (their daemons may be dead
    already: a dead FUSE mount would keep the directory from being removed)."""
    points = mounts_under(directory)
    for point in points:
        subprocess.run(["umount", "-l", point], capture_output=True)
    return len(points)
