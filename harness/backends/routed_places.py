"""Routes out of a lab's bridge, for client places that must reach a cluster
outside any bridge of ours (an external cluster, SSH hosts).

A client place is still a namespace with a veth on the lab's bridge
(bridge_places.py), its default route via the bridge's address on this
host; these routes let its packets leave: IP forwarding on, FORWARD
accepted for the bridge, and the lab's subnet masqueraded behind this
host's own address (the cluster's hosts need no route back to our
subnet). A client cut stays a rule in the client's own namespace, so it
works the same whatever the cluster is. Every rule carries the comment
"gregor-route:<lab>", so a crashed lab's routes are found by name.
"""

from __future__ import annotations

from harness.backends import netns


def _comment(lab: str) -> list[str]:
    return ["-m", "comment", "--comment", f"gregor-route:{lab}"]


def _rules(lab: str) -> list[tuple[str, str, list[str]]]:
    """(table, chain, rule) of the lab's routes."""
    bridge, subnet = netns.bridge_name(lab), str(netns.lab_subnet(lab))
    return [
        ("nat", "POSTROUTING", ["-s", subnet, "!", "-o", bridge, *_comment(lab), "-j", "MASQUERADE"]),
        ("filter", "FORWARD", ["-i", bridge, *_comment(lab), "-j", "ACCEPT"]),
        ("filter", "FORWARD", ["-o", bridge, *_comment(lab), "-j", "ACCEPT"]),
    ]


def open_routes(lab: str) -> None:
    """Lets the lab's client places reach any host this host reaches (idempotent)."""
    netns.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
    for table, chain, rule in _rules(lab):
        if netns.run(["iptables", "-w", "-t", table, "-C", chain, *rule], check=False).returncode != 0:
            netns.run(["iptables", "-w", "-t", table, "-I", chain, *rule])


def close_routes(lab: str) -> bool:
    """Removes the lab's routes (by name, also after a crash); True if any was there."""
    removed = False
    for table, chain, rule in _rules(lab):
        while netns.run(["iptables", "-w", "-t", table, "-D", chain, *rule], check=False).returncode == 0:
            removed = True
    return removed
