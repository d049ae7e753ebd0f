"""Client places on a lab bridge of this host: what the local and Docker backends share.

Both put their nodes on a Linux bridge named "<lab>-br" with the subnet the
lab name gives, so a client place is the same on both: a namespace of its
own with a veth on that bridge and an address from .100 up. A client cut is
then a rule in that namespace, whatever the nodes are.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys

from ground.errors import GregorError
from ground.protocols import ClientPlace
from harness.backends import netns
from harness.backends.namespace_node import HARNESS_DIR, NamespaceNode

FIRST_CLIENT_HOST = 100


class BridgePlaces:
    """Backend methods for client places on the lab's bridge (state: subnet, bridge_ip, nodes, clients)."""

    def client_place(self, lab: str, state: dict, name: str) -> ClientPlace:
        netns.check_member_name(name)
        if any(n["name"] == name for n in state["nodes"]):
            raise GregorError(f"client place {name!r} clashes with a node name; pick another")
        clients = state.setdefault("clients", {})
        subnet = ipaddress.IPv4Network(state["subnet"])
        address = clients.get(name)
        if address is None:
            used = set(clients.values())
            free = [str(h) for h in list(subnet.hosts())[FIRST_CLIENT_HOST - 1 :] if str(h) not in used]
            if not free:
                raise GregorError(f"lab {lab} has no free client addresses left")
            address = free[0]
        namespace = netns.ns_name(lab, name)
        if namespace not in netns.namespaces():
            netns.create_member(lab, name, address, subnet.prefixlen, state["bridge_ip"])
        clients[name] = address
        place = ClientPlace(name=name, address=address, handle={"netns": namespace})
        self.place_node(lab, place).prepare_network()
        return place

    def place_node(self, lab: str, place: ClientPlace):
        return NamespaceNode(place.name, place.address, "/tmp", place.handle["netns"])

    def remove_client_place(self, lab: str, state: dict, name: str) -> None:
        stop_emulators(netns.ns_name(lab, name), prefix=False)
        netns.delete_member(lab, name)
        state.setdefault("clients", {}).pop(name, None)

    def controller_address(self, lab: str, state: dict) -> str:
        return state["bridge_ip"]


def stop_emulators(tag: str, prefix: bool) -> None:
    """Ends this host's netem emulators serving namespace `tag` (or every `tag*`)."""
    subprocess.run(
        [
            sys.executable,
            str(HARNESS_DIR / "nfqueue_netem.py"),
            "--stop",
            "--tag",
            tag,
            *(["--prefix"] if prefix else []),
        ],
        capture_output=True,
        timeout=30,
    )


def kill_processes_in(ns: str) -> None:
    """SIGKILLs whatever still runs in namespace `ns` (a server a test or a user
    started by hand there): deleting the namespace would leave it running,
    unreachable, with no lab to take it down."""
    listed = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30).stdout
    for pid in listed.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def remove_namespaces(lab: str, keep: tuple[str, ...] = ()) -> int:
    """Every namespace and link named "<lab>-*" (but those in `keep`); how many namespaces."""
    prefix = f"{lab}-"
    stop_emulators(prefix, prefix=True)  # a crashed run's emulators would keep namespaces alive
    spaces = [ns for ns in netns.namespaces() if ns.startswith(prefix)]
    for ns in spaces:
        kill_processes_in(ns)
        netns.quiet(["ip", "netns", "del", ns])
    for link in netns.links_with_prefix(prefix):
        if link not in keep:
            netns.quiet(["ip", "link", "del", link])
    return len(spaces)
