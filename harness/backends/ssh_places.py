"""Client places for nodes that are not on a bridge of this host (SSH hosts).

A client place is still a network namespace on the controller (so a client
cut is a rule in the client's own namespace, as on every backend), on a
bridge "<lab>-br" of the lab's own subnet, as in a local lab. What differs
is the way out: the hosts know no route back to that subnet, so the
controller forwards the places' packets and masquerades them behind its own
address. Only the lab's own hosts are reachable from a place: the place's
routes, the NAT rules and the FORWARD ACCEPT rules (needed where dockerd set
the policy to DROP) name each host address, and nothing else.

Every rule carries the comment "gregor-ssh:<lab>", so teardown finds them
by the lab's name, also after a crash.
"""

from __future__ import annotations

import ipaddress
import shlex

from ground.errors import GregorError
from ground.protocols import ClientPlace
from harness.backends import netns
from harness.backends.bridge_places import BridgePlaces
from harness.backends.docker_engine import enable_forwarding
from harness.backends.local import require_root


def comment(lab: str) -> str:
    return f"gregor-ssh:{lab}"


def _rules(lab: str, state: dict) -> list[tuple[str, list[str]]]:
    """(table, rule) for each host: masquerade the places' packets to it and
    let them (and the answers) through FORWARD."""
    subnet = state["subnet"]
    tag = ["-m", "comment", "--comment", comment(lab)]
    found = []
    for node in state["nodes"]:
        address = node["address"]
        found.append(("nat", ["POSTROUTING", "-s", subnet, "-d", address, *tag, "-j", "MASQUERADE"]))
        found.append(("filter", ["FORWARD", "-s", subnet, "-d", address, *tag, "-j", "ACCEPT"]))
        found.append(("filter", ["FORWARD", "-s", address, "-d", subnet, *tag, "-j", "ACCEPT"]))
    return found


def open_gateway(lab: str, state: dict) -> None:
    """The bridge, forwarding and NAT towards the lab's hosts (idempotent)."""
    require_root()
    subnet = ipaddress.IPv4Network(state["subnet"])
    bridge = netns.bridge_name(lab)
    if not netns.link_exists(bridge):
        holder = netns.subnet_in_use(subnet, except_dev=bridge)
        if holder is not None:
            raise GregorError(
                f"subnet {subnet} for the client places of lab {lab!r} is already used by "
                f"{holder}; choose another --lab name"
            )
        netns.create_bridge(lab, state["bridge_ip"], subnet.prefixlen)
    enable_forwarding()
    for table, rule in _rules(lab, state):
        if netns.run(["iptables", "-w", "-t", table, "-C", *rule], check=False).returncode != 0:
            netns.run(["iptables", "-w", "-t", table, "-I", *rule])


def close_gateway(lab: str) -> int:
    """Removes every rule of the lab's (found by its comment); how many."""
    removed = 0
    for table, chain in (("nat", "POSTROUTING"), ("filter", "FORWARD")):
        listing = netns.run(["iptables", "-w", "-t", table, "-S", chain], check=False).stdout
        for line in listing.splitlines():
            words = shlex.split(line)
            if words[:1] == ["-A"] and comment(lab) in words:
                netns.quiet(["iptables", "-w", "-t", table, "-D", *words[1:]])
                removed += 1
    return removed


def gateway_leftovers(lab: str) -> list[str]:
    found = []
    for table, chain in (("nat", "POSTROUTING"), ("filter", "FORWARD")):
        listing = netns.run(["iptables", "-w", "-t", table, "-S", chain], check=False).stdout
        found += [f"iptables {table} rule {line}" for line in listing.splitlines() if comment(lab) in line]
    return found


class NatPlaces(BridgePlaces):
    """Backend methods for client places behind NAT (state: subnet, bridge_ip, nodes, clients)."""

    def client_place(self, lab: str, state: dict, name: str) -> ClientPlace:
        open_gateway(lab, state)
        place = super().client_place(lab, state, name)
        namespace = place.handle["netns"]
        # Only the lab's hosts: no default route out of the place.
        netns.quiet(netns.in_ns(namespace, ["ip", "route", "del", "default"]))
        for node in state["nodes"]:
            netns.run(
                netns.in_ns(namespace, ["ip", "route", "replace", f"{node['address']}/32", "via", state["bridge_ip"]])
            )
        return place

    def controller_address(self, lab: str, state: dict) -> str:
        """The address this host's packets to the first node leave from."""
        return netns.route_to(state["nodes"][0]["address"]).get("prefsrc", "")
