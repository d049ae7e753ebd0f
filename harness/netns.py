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
import select
import signal
import subprocess
import sys
import time
import zlib

from harness.errors import GregorError
from harness.nfqueue_netem import DUPLICATE_MARK, Impairment
from harness.paths import state_dir
from harness.procfs import proc_cmdline, proc_state

LAB_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MEMBER_NAME = re.compile(r"^[a-z][a-z0-9]{0,5}$")
NODE_IF = "eth0"  # the interface name inside every namespace
CHAIN_IN = "GREGOR-IN"
CHAIN_OUT = "GREGOR-OUT"
CHAIN_NETEM = "GREGOR-NETEM"  # netem emulation where the kernel lacks the qdisc
EMULATOR_QUEUE = 7  # NFQUEUE number of the emulator (queues are per namespace)


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
    stop_emulators(ns_name(lab, member))  # its netem emulator would keep the namespace alive
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


NETEM_QDISC = "tc netem qdisc"
NETEM_EMULATED = "userspace emulation (NFQUEUE)"


def set_netem(ns: str, spec: str) -> str:
    """tc netem on eth0; without sch_netem, the same effects are emulated.
    Returns which of the two applied it (NETEM_QDISC or NETEM_EMULATED), for
    the history: the emulation's timing is close to the qdisc's, not equal.

    The fallback (see harness/nfqueue_netem.py) takes eth0's outgoing packets
    into userspace through NFQUEUE for delay, jitter, duplication and reordering;
    loss alone is an iptables statistic match, rate a tbf qdisc. Everything
    lives in chain GREGOR-NETEM and one emulator process per namespace, which
    clear_netem removes (also after a crash of the harness).
    """
    args = spec.split()
    if not args:
        raise GregorError("empty netem spec; give e.g. 'delay 100ms 20ms loss 5%'")
    clear_netem(ns)
    result = run(in_ns(ns, ["tc", "qdisc", "replace", "dev", NODE_IF, "root", "netem", *args]), check=False)
    if result.returncode == 0:
        return NETEM_QDISC
    if "unknown" not in result.stderr:
        raise GregorError(f"tc rejected netem spec {spec!r}: {result.stderr.strip()}")
    _emulate_netem(ns, spec)
    return NETEM_EMULATED


def parse_netem(spec: str):
    """(Impairment, rate or None) from netem's own words; GregorError names what is not understood."""
    words = spec.split()
    fields: dict[str, float] = {}
    rate = None

    def number(word: str, unit: str, what: str) -> float:
        if not word.endswith(unit):
            raise GregorError(f"netem spec {spec!r}: {what} needs a value in {unit}, got {word!r}")
        try:
            return float(word[:-len(unit)])
        except ValueError:
            raise GregorError(f"netem spec {spec!r}: {what} value {word!r} is not a number") from None

    index = 0
    while index < len(words):
        word, rest = words[index], words[index + 1:]
        if word == "delay" and rest:
            fields["delay_ms"] = number(rest[0], "ms", "delay")
            index += 2
            if index < len(words) and words[index].endswith("ms"):
                fields["jitter_ms"] = number(words[index], "ms", "jitter")
                index += 1
            if words[index:index + 2] == ["distribution", "normal"]:
                index += 2
        elif word in ("loss", "duplicate", "reorder") and rest:
            fields[f"{word}_pct"] = number(rest[0], "%", word)
            index += 2
            if word == "reorder" and index < len(words) and words[index].endswith("%"):
                index += 1  # netem's correlation: each draw here is independent
        elif word == "rate" and rest:
            rate = rest[0]
            index += 2
        else:
            raise GregorError(f"netem spec {spec!r}: cannot emulate {word!r} without the netem qdisc; "
                              "use delay Xms [Yms], loss P%, duplicate P%, reorder P%, rate R")
    return Impairment(**fields), rate


def _emulate_netem(ns: str, spec: str) -> None:
    impairment, rate = parse_netem(spec)
    run(in_ns(ns, ["iptables", "-w", "-N", CHAIN_NETEM]), check=False)
    if run(in_ns(ns, ["iptables", "-w", "-C", "OUTPUT", "-j", CHAIN_NETEM]), check=False).returncode != 0:
        run(in_ns(ns, ["iptables", "-w", "-I", "OUTPUT", "1", "-j", CHAIN_NETEM]))
    if impairment.delay_ms or impairment.duplicate_pct or impairment.reorder_pct:
        _start_emulator(ns, impairment)
        run(in_ns(ns, ["iptables", "-w", "-A", CHAIN_NETEM, "-o", NODE_IF, "-m", "mark", "!", "--mark",
                       str(DUPLICATE_MARK), "-j", "NFQUEUE", "--queue-num", str(EMULATOR_QUEUE), "--queue-bypass"]))
    elif impairment.loss_pct:
        run(in_ns(ns, ["iptables", "-w", "-A", CHAIN_NETEM, "-o", NODE_IF, "-m", "statistic", "--mode", "random",
                       "--probability", f"{impairment.loss_pct / 100:.4f}", "-j", "DROP"]))
    if rate is not None:
        result = run(in_ns(ns, ["tc", "qdisc", "replace", "dev", NODE_IF, "root", "tbf", "rate", rate,
                                "burst", "32kbit", "latency", "400ms"]), check=False)
        if result.returncode != 0:
            raise GregorError(f"tc rejected rate {rate!r}: {result.stderr.strip()}")


def _start_emulator(ns: str, impairment) -> None:
    """Starts the NFQUEUE emulator in `ns` and waits until it has bound its queue.

    No pid file: clear_netem finds it by its --tag in /proc, which also works
    after a crash and can never hit a recycled pid. Its stderr goes to
    <state dir>/netem/<ns>.log, next to the lab's state file.
    """
    log_dir = os.path.join(state_dir(), "netem")
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, f"{ns}.log")
    command = in_ns(ns, [sys.executable, "-m", "harness.nfqueue_netem", "--tag", ns, "--device", NODE_IF,
                         "--queue", str(EMULATOR_QUEUE), "--seed", str(zlib.crc32(ns.encode())),
                         *impairment.args()])
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ready, _, _ = select.select([process.stdout], [], [], 10)
    line = process.stdout.readline() if ready else b""
    process.stdout.close()
    if line.strip() != b"ready":
        process.kill()
        process.wait()
        with open(log_path, "rb") as log:
            lines = log.read().decode(errors="replace").strip().splitlines()
        raise GregorError(f"the netem emulator did not start in {ns}: {lines[-1] if lines else 'no output'}")


def emulator_pids(tag: str, prefix: bool = False) -> list[int]:
    """Emulator processes serving namespace `tag` (with prefix=True: every
    namespace whose name starts with it), found from /proc, so a crashed
    harness's emulators are found too."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = proc_cmdline(int(entry))
        if "harness.nfqueue_netem" not in argv or "--tag" not in argv[:-1]:
            continue
        served = argv[argv.index("--tag") + 1]
        if served == tag or (prefix and served.startswith(tag)):
            pids.append(int(entry))
    return pids


def stop_emulators(tag: str, prefix: bool = False) -> int:
    """SIGTERM (they let held packets go), then SIGKILL whatever is left; returns how many."""
    pids = emulator_pids(tag, prefix)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            _signal(pid, signal.SIGKILL)
    return len(pids)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """Running and not a zombie (an unreaped child still has a /proc entry)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reaps our own child (the harness started it)
    except ChildProcessError:
        pass
    return proc_state(pid) not in (None, "Z")


def clear_netem(ns: str) -> None:
    """Idempotent: the qdisc, the GREGOR-NETEM rules (first, so nothing new is
    queued) and the namespace's emulator, if any, are gone afterwards."""
    run(in_ns(ns, ["tc", "qdisc", "del", "dev", NODE_IF, "root"]), check=False)
    run(in_ns(ns, ["iptables", "-w", "-F", CHAIN_NETEM]), check=False)
    stop_emulators(ns)
