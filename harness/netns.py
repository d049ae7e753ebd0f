"""Linux plumbing for the local backend: namespaces, veths, bridge, chains.

Every call is an argument list (never a shell string). Removal helpers
ignore "does not exist", so teardown is idempotent and also cleans what a
crashed run left behind.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import subprocess

from harness.errors import GregorError

LAB_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MEMBER_NAME = re.compile(r"^[a-z][a-z0-9]{0,5}$")
NODE_IF = "eth0"  # the interface name inside every namespace
CHAIN_IN = "GREGOR-IN"
CHAIN_OUT = "GREGOR-OUT"
CHAIN_NETEM = "GREGOR-NETEM"  # loss emulation where the kernel lacks netem


def check_lab_name(name: str) -> str:
    # Interface names are capped at 15 characters: "<lab>-<member>" must fit.
    if not LAB_NAME.match(name or ""):
        raise GregorError(
            f"bad lab name {name!r}: use 1-8 lowercase letters or digits, starting with a letter"
        )
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


def namespaces() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def link_exists(name: str) -> bool:
    return run(["ip", "link", "show", "dev", name], check=False).returncode == 0


def subnet_in_use(subnet: ipaddress.IPv4Network, except_dev: str) -> str | None:
    """The device that already routes `subnet` (another lab, a host net), if any."""
    out = run(["ip", "-o", "-4", "route", "show"], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        try:
            net = ipaddress.IPv4Network(parts[0], strict=False)
        except ValueError:
            continue
        dev = parts[parts.index("dev") + 1] if "dev" in parts else "?"
        if dev != except_dev and net.prefixlen > 0 and net.overlaps(subnet):
            return dev
    return None


def create_bridge(lab: str, address: str, prefix: int) -> None:
    br = bridge_name(lab)
    if not link_exists(br):
        run(["ip", "link", "add", br, "type", "bridge"])
    run(["ip", "addr", "replace", f"{address}/{prefix}", "dev", br])
    run(["ip", "link", "set", br, "up"])


def delete_bridge(lab: str) -> None:
    quiet(["ip", "link", "del", bridge_name(lab)])


def create_member(lab: str, member: str, address: str, prefix: int, gateway: str) -> str:
    """A namespace with one veth on the lab bridge; returns the namespace name."""
    ns = ns_name(lab, member)
    veth = host_veth(lab, member)
    # A short temporary name for the namespace side; it becomes eth0 inside.
    peer = "gp" + hashlib.sha1(veth.encode()).hexdigest()[:12]
    delete_member(lab, member)
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
    run(["ip", "link", "set", peer, "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge_name(lab)])
    run(["ip", "link", "set", veth, "up"])
    run(in_ns(ns, ["ip", "link", "set", peer, "name", NODE_IF]))
    run(in_ns(ns, ["ip", "addr", "add", f"{address}/{prefix}", "dev", NODE_IF]))
    run(in_ns(ns, ["ip", "link", "set", NODE_IF, "up"]))
    run(in_ns(ns, ["ip", "link", "set", "lo", "up"]))
    run(in_ns(ns, ["ip", "route", "add", "default", "via", gateway]))
    install_chains(ns)
    return ns


def delete_member(lab: str, member: str) -> None:
    quiet(["ip", "netns", "del", ns_name(lab, member)])
    quiet(["ip", "link", "del", host_veth(lab, member)])


def install_chains(ns: str) -> None:
    """Gregor's own iptables chains in the namespace, hooked first in INPUT/OUTPUT."""
    for chain, hook in ((CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")):
        run(in_ns(ns, ["iptables", "-w", "-N", chain]), check=False)
        if run(in_ns(ns, ["iptables", "-w", "-C", hook, "-j", chain]), check=False).returncode != 0:
            run(in_ns(ns, ["iptables", "-w", "-I", hook, "1", "-j", chain]))


def drop(ns: str, direction: str, ips: list[str]) -> None:
    """DROP packets from (`in`) or to (`out`) the given addresses."""
    chain, flag = (CHAIN_IN, "-s") if direction == "in" else (CHAIN_OUT, "-d")
    for ip in ips:
        ipaddress.IPv4Address(ip)  # refuse anything that is not an address
        rule = [chain, flag, ip, "-j", "DROP"]
        if run(in_ns(ns, ["iptables", "-w", "-C", *rule]), check=False).returncode != 0:
            run(in_ns(ns, ["iptables", "-w", "-A", *rule]))


def flush_chains(ns: str) -> None:
    for chain in (CHAIN_IN, CHAIN_OUT):
        run(in_ns(ns, ["iptables", "-w", "-F", chain]), check=False)


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


def set_netem(ns: str, spec: str) -> None:
    """tc netem on eth0; without sch_netem, loss and rate are emulated instead.

    The fallback drops outgoing packets at random with iptables' statistic
    match (in chain GREGOR-NETEM) and limits rate with tbf; delay,
    duplication, reordering and corruption need netem and give an error.
    """
    args = spec.split()
    if not args:
        raise GregorError("empty netem spec; give e.g. 'delay 100ms 20ms loss 5%'")
    clear_netem(ns)
    result = run(in_ns(ns, ["tc", "qdisc", "replace", "dev", NODE_IF, "root", "netem", *args]), check=False)
    if result.returncode == 0:
        return
    if "unknown" not in result.stderr:
        raise GregorError(f"tc rejected netem spec {spec!r}: {result.stderr.strip()}")
    _emulate_netem(ns, spec, args)


def _emulate_netem(ns: str, spec: str, args: list[str]) -> None:
    loss = rate = None
    index = 0
    while index < len(args):
        word = args[index]
        value = args[index + 1] if index + 1 < len(args) else ""
        if word == "loss" and value.endswith("%"):
            loss = float(value[:-1]) / 100
        elif word == "rate" and value:
            rate = value
        else:
            raise GregorError(
                f"this kernel has no netem qdisc (sch_netem), so {spec!r} cannot be applied; "
                "only 'loss P%' and 'rate R' are emulated here (iptables statistic, tbf)"
            )
        index += 2
    if loss is not None:
        run(in_ns(ns, ["iptables", "-w", "-N", CHAIN_NETEM]), check=False)
        if run(in_ns(ns, ["iptables", "-w", "-C", "OUTPUT", "-j", CHAIN_NETEM]), check=False).returncode != 0:
            run(in_ns(ns, ["iptables", "-w", "-I", "OUTPUT", "1", "-j", CHAIN_NETEM]))
        run(in_ns(ns, ["iptables", "-w", "-A", CHAIN_NETEM, "-m", "statistic", "--mode", "random",
                       "--probability", f"{loss:.4f}", "-j", "DROP"]))
    if rate is not None:
        result = run(in_ns(ns, ["tc", "qdisc", "replace", "dev", NODE_IF, "root", "tbf", "rate", rate,
                                "burst", "32kbit", "latency", "400ms"]), check=False)
        if result.returncode != 0:
            raise GregorError(f"tc rejected rate {rate!r}: {result.stderr.strip()}")


def clear_netem(ns: str) -> None:
    run(in_ns(ns, ["tc", "qdisc", "del", "dev", NODE_IF, "root"]), check=False)
    run(in_ns(ns, ["iptables", "-w", "-F", CHAIN_NETEM]), check=False)
