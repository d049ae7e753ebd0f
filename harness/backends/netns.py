"""Linux plumbing: network namespaces, veths and bridges on the controller host.

The local backend builds its nodes from these; every backend builds its
client places from them (a client in a namespace of its own can be cut off).
Every call is an argument list (never a shell string). Removal helpers
ignore "does not exist", so teardown is idempotent and also cleans what a
crashed run left behind.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import subprocess

from ground.errors import GregorError

LAB_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MEMBER_NAME = re.compile(r"^[a-z][a-z0-9]{0,5}$")
NODE_IF = "eth0"  # the interface name inside every namespace


def check_lab_name(name: str) -> str:
    # Interface names are capped at 15 characters: "<lab>-<member>" must fit.
    if not LAB_NAME.match(name or ""):
        raise GregorError(f"bad lab name {name!r}: use 1-8 lowercase letters or digits, starting with a letter")
    return name


def check_member_name(name: str) -> str:
    if not MEMBER_NAME.match(name or ""):
        raise GregorError(
            f"bad namespace member name {name!r}: use 1-6 lowercase letters or digits, starting with a letter"
        )
    return name


def lab_subnet(lab: str) -> ipaddress.IPv4Network:
    """A /24 inside 10.128.0.0/9 derived from the lab name, so labs differ."""
    digest = hashlib.sha256(lab.encode()).digest()
    return ipaddress.IPv4Network(f"10.{128 + digest[0] % 128}.{digest[1]}.0/24")


def bridge_name(lab: str) -> str:
    return f"{lab}-br"


def ns_name(lab: str, member: str) -> str:
    return f"{lab}-{member}"


def host_veth(lab: str, member: str) -> str:
    return f"{lab}-{member}"


def run(cmd: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise GregorError(f"command failed ({' '.join(cmd)}): {result.stderr.strip() or result.stdout.strip()}")
    return result


def quiet(cmd: list[str]) -> None:
    """Runs a removal step whose failure only means "already gone"."""
    subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def in_ns(ns: str, cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def ip_json(args: list[str], ns: str | None = None) -> list[dict]:
    """`ip -j ARGS` (in namespace `ns` if given), as the JSON it prints; [] when
    it prints nothing (no namespace, no route) or fails."""
    cmd = ["ip", "-j", *args]
    out = run(in_ns(ns, cmd) if ns else cmd, check=False).stdout.strip()
    try:
        found = json.loads(out) if out else []
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def namespaces() -> list[str]:
    return [entry["name"] for entry in ip_json(["netns", "list"]) if entry.get("name")]


def link_exists(name: str) -> bool:
    return run(["ip", "link", "show", "dev", name], check=False).returncode == 0


def subnet_in_use(subnet: ipaddress.IPv4Network, except_dev: str) -> str | None:
    """The device that already routes `subnet` (another lab, a host net), if any."""
    for route in ip_json(["-4", "route", "show"]):
        try:
            net = ipaddress.IPv4Network(route.get("dst", ""), strict=False)
        except ValueError:  # "default", or a route of another kind
            continue
        dev = route.get("dev", "?")
        if dev != except_dev and net.prefixlen > 0 and net.overlaps(subnet):
            return dev
    return None


def route_to(address: str) -> dict:
    """The route this host's packets to `address` take ({"dev": ..., "prefsrc": ...}; {} if none)."""
    found = ip_json(["-4", "route", "get", address])
    return found[0] if found else {}


def create_bridge(lab: str, address: str, prefix: int) -> None:
    br = bridge_name(lab)
    if not link_exists(br):
        run(["ip", "link", "add", br, "type", "bridge"])
    run(["ip", "addr", "replace", f"{address}/{prefix}", "dev", br])
    run(["ip", "link", "set", br, "up"])


def delete_bridge(lab: str) -> None:
    quiet(["ip", "link", "del", bridge_name(lab)])


def create_member(
    lab: str, member: str, address: str, prefix: int, gateway: str | None, bridge: str | None = None
) -> str:
    """A namespace with one veth on `bridge` (default: the lab's own bridge);
    returns the namespace name."""
    ns = ns_name(lab, member)
    veth = host_veth(lab, member)
    # A short temporary name for the namespace side; it becomes eth0 inside.
    peer = "gp" + hashlib.sha1(veth.encode()).hexdigest()[:12]
    delete_member(lab, member)
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
    run(["ip", "link", "set", peer, "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge or bridge_name(lab)])
    run(["ip", "link", "set", veth, "up"])
    run(in_ns(ns, ["ip", "link", "set", peer, "name", NODE_IF]))
    run(in_ns(ns, ["ip", "addr", "add", f"{address}/{prefix}", "dev", NODE_IF]))
    run(in_ns(ns, ["ip", "link", "set", NODE_IF, "up"]))
    run(in_ns(ns, ["ip", "link", "set", "lo", "up"]))
    if gateway:
        run(in_ns(ns, ["ip", "route", "add", "default", "via", gateway]))
    return ns


def delete_member(lab: str, member: str) -> None:
    """Call stop_emulators first: a netem emulator would keep the namespace alive."""
    quiet(["ip", "netns", "del", ns_name(lab, member)])
    quiet(["ip", "link", "del", host_veth(lab, member)])


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (some VM kernels ship without it)."""
    # No dash in the name, so no lab's `down` (which removes "<lab>-*") can take it.
    probe = f"gprobe{os.getpid()}"
    quiet(["ip", "netns", "add", probe])
    try:
        result = run(in_ns(probe, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]), check=False)
        return result.returncode == 0
    finally:
        quiet(["ip", "netns", "del", probe])


def links_with_prefix(prefix: str) -> list[str]:
    return [link["ifname"] for link in ip_json(["link", "show"]) if link.get("ifname", "").startswith(prefix)]


def bridge_forwarding(bridge: str, allow: bool) -> None:
    """Lets frames cross our bridge whatever the FORWARD policy: with
    br_netfilter, bridged frames pass iptables' FORWARD chain, and dockerd
    sets its policy to DROP when it turns IP forwarding on (moby#28257)."""
    rule = ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", "gregor", "-j", "ACCEPT"]
    present = run(["iptables", "-w", "-C", *rule], check=False).returncode == 0
    if allow and not present:
        run(["iptables", "-w", "-I", *rule])
    elif not allow:
        while run(["iptables", "-w", "-D", *rule], check=False).returncode == 0:
            pass
