"""Network faults on any node, through its `exec`: the same commands on every backend.

Each node gets two iptables chains of ours (GREGOR-IN, GREGOR-OUT), hooked
first into INPUT and OUTPUT; a cut is a DROP rule in one of them and a heal
flushes both, so nothing else on the node is ever touched. netem is the
kernel's qdisc where the kernel has it; otherwise the same effects are
emulated (harness/nfqueue_netem.py, started on the node): delay, jitter,
duplication and reordering through NFQUEUE, loss alone by an iptables
statistic match, rate by a tbf qdisc, all in chain GREGOR-NETEM.
"""

from __future__ import annotations

import ipaddress
import zlib

from ground.errors import GregorError
from harness.nfqueue_netem import DUPLICATE_MARK, Impairment

CHAIN_IN = "GREGOR-IN"
CHAIN_OUT = "GREGOR-OUT"
CHAIN_NETEM = "GREGOR-NETEM"
EMULATOR_QUEUE = 7  # NFQUEUE number of the emulator (queues are per network namespace)

NETEM_QDISC = "tc netem qdisc"
NETEM_EMULATED = "userspace emulation (NFQUEUE)"  # the history's `applied_by` words (docs/HISTORY.md)


def _iptables(node, *args: str, check: bool = True):
    return node.exec(["iptables", "-w", *args], check=check)


def install_chains(node) -> None:
    """Our chains, hooked first into INPUT/OUTPUT (idempotent)."""
    for chain, hook in ((CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")):
        _iptables(node, "-N", chain, check=False)
        if _iptables(node, "-C", hook, "-j", chain, check=False).returncode != 0:
            _iptables(node, "-I", hook, "1", "-j", chain)


def drop(node, direction: str, addresses, port: int | None = None) -> None:
    """DROP packets from (`in`) or to (`out`) these addresses; with `port`,
    only TCP packets to that port of the receiving side."""
    chain, flag = (CHAIN_IN, "-s") if direction == "in" else (CHAIN_OUT, "-d")
    only = [] if port is None else ["-p", "tcp", "--dport", str(int(port))]
    for address in addresses:
        ipaddress.ip_address(address)  # refuse anything that is not an address
        rule = [chain, flag, str(address), *only, "-j", "DROP"]
        if _iptables(node, "-C", *rule, check=False).returncode != 0:
            _iptables(node, "-A", *rule)


def flush(node) -> None:
    for chain in (CHAIN_IN, CHAIN_OUT):
        _iptables(node, "-F", chain, check=False)


def rules(node) -> list[str]:
    """The DROP rules in force in our chains (for tests and status)."""
    found = []
    for chain in (CHAIN_IN, CHAIN_OUT, CHAIN_NETEM):
        out = _iptables(node, "-S", chain, check=False).stdout
        found += [line for line in out.splitlines() if line.startswith("-A")]
    return found


def set_netem(node, device: str, spec: str, tag: str) -> str:
    """tc netem on `device`; without sch_netem, the same effects emulated.
    Returns which of the two applied it (NETEM_QDISC or NETEM_EMULATED): the
    emulation's timing is close to the qdisc's, not equal, and the history says so."""
    args = spec.split()
    if not args:
        raise GregorError("empty netem spec; give e.g. 'delay 100ms 20ms loss 5%'")
    clear_netem(node, device, tag)
    result = node.exec(["tc", "qdisc", "replace", "dev", device, "root", "netem", *args], check=False)
    if result.returncode == 0:
        return NETEM_QDISC
    if "unknown" not in (result.stderr or ""):
        raise GregorError(f"{node.name}: tc rejected netem spec {spec!r}: {(result.stderr or '').strip()}")
    _emulate(node, device, spec, tag)
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
            return float(word[: -len(unit)])
        except ValueError:
            raise GregorError(f"netem spec {spec!r}: {what} value {word!r} is not a number") from None

    index = 0
    while index < len(words):
        word, rest = words[index], words[index + 1 :]
        if word == "delay" and rest:
            fields["delay_ms"] = number(rest[0], "ms", "delay")
            index += 2
            if index < len(words) and words[index].endswith("ms"):
                fields["jitter_ms"] = number(words[index], "ms", "jitter")
                index += 1
            if words[index : index + 2] == ["distribution", "normal"]:
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
            raise GregorError(
                f"netem spec {spec!r}: cannot emulate {word!r} without the netem qdisc; "
                "use delay Xms [Yms], loss P%, duplicate P%, reorder P%, rate R"
            )
    return Impairment(**fields), rate


def _emulate(node, device: str, spec: str, tag: str) -> None:
    impairment, rate = parse_netem(spec)
    _iptables(node, "-N", CHAIN_NETEM, check=False)
    if _iptables(node, "-C", "OUTPUT", "-j", CHAIN_NETEM, check=False).returncode != 0:
        _iptables(node, "-I", "OUTPUT", "1", "-j", CHAIN_NETEM)
    if impairment.delay_ms or impairment.duplicate_pct or impairment.reorder_pct:
        _start_emulator(node, device, impairment, tag)
        _iptables(
            node,
            "-A",
            CHAIN_NETEM,
            "-o",
            device,
            "-m",
            "mark",
            "!",
            "--mark",
            str(DUPLICATE_MARK),
            "-j",
            "NFQUEUE",
            "--queue-num",
            str(EMULATOR_QUEUE),
            "--queue-bypass",
        )
    elif impairment.loss_pct:
        _iptables(
            node,
            "-A",
            CHAIN_NETEM,
            "-o",
            device,
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            f"{impairment.loss_pct / 100:.4f}",
            "-j",
            "DROP",
        )
    if rate is not None:
        result = node.exec(
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                device,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                "32kbit",
                "latency",
                "400ms",
            ],
            check=False,
        )
        if result.returncode != 0:
            raise GregorError(f"{node.name}: tc rejected rate {rate!r}: {(result.stderr or '').strip()}")


def _emulator_paths(node, tag: str) -> tuple[str, str]:
    return f"{node.home}/netem-{tag}.log", f"{node.home}/netem-{tag}.pid"


def _start_emulator(node, device: str, impairment, tag: str) -> None:
    """Starts the emulator on the node and waits until it has bound its queue
    (it prints "ready" into its log). It is found again by its --tag, never
    by a pid file, so a crashed harness's emulator is found too."""
    log, pid_file = _emulator_paths(node, tag)
    node.exec(["rm", "-f", log], check=False)
    argv = [
        *node.tool("nfqueue_netem.py"),
        "--tag",
        tag,
        "--device",
        device,
        "--queue",
        str(EMULATOR_QUEUE),
        "--seed",
        str(zlib.crc32(tag.encode())),
        *impairment.args(),
    ]
    node.spawn(argv, log=log, pid_file=pid_file)
    if node.await_log(log, _emulator_ready, 10, 0.05, lambda text: "Traceback" in text or "Error" in text):
        return
    stop_emulators(node, tag)
    last = (node.read_text(log) or "").strip().splitlines()
    raise GregorError(f"{node.name}: the netem emulator did not start: {last[-1] if last else 'no output'}")


def _emulator_ready(text: str) -> bool:
    return "ready" in text.split()


def stop_emulators(node, tag: str, prefix: bool = False) -> None:
    """Ends the node's emulators serving `tag` (prefix: every tag starting with it)."""
    node.exec([*node.tool("nfqueue_netem.py"), "--stop", "--tag", tag, *(["--prefix"] if prefix else [])], check=False)


def clear_netem(node, device: str, tag: str) -> None:
    """Idempotent: the qdisc, the GREGOR-NETEM rules (first, so nothing new is
    queued) and the node's emulator are gone afterwards."""
    node.exec(["tc", "qdisc", "del", "dev", device, "root"], check=False)
    _iptables(node, "-F", CHAIN_NETEM, check=False)
    stop_emulators(node, tag)
