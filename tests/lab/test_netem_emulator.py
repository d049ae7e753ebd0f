"""The userspace netem (NFQUEUE) that stands in where the kernel lacks sch_netem.

Pure parts first (spec words, hold times, nfnetlink messages), then real
packets between two namespaces of our own joined by a veth pair: the delay
measured on TCP round trips, duplicates counted on UDP, and the clean-up.
"""

from __future__ import annotations

import random
import statistics
import struct
import subprocess
import sys
import time

import pytest

from ground.errors import GregorError
from harness import netfaults
from harness.backends import netns
from harness.backends.namespace_node import NamespaceNode
from harness.nfqueue_netem import (
    NF_ACCEPT,
    NF_DROP,
    NFNL_SUBSYS_QUEUE,
    NFQA_PACKET_HDR,
    NFQA_PAYLOAD,
    NFQNL_MSG_PACKET,
    NLMSG_ERROR,
    Emulator,
    Impairment,
    _attr,
    bind_message,
    emulators,
    hold_seconds,
    parse_messages,
    stop_emulators,
    verdict_message,
)
from lab.helpers import needs_root

A, B = "nqa", "nqb"
A_IP, B_IP = "10.77.0.1", "10.77.0.2"
NODE_A = NamespaceNode("nqa", A_IP, "/tmp/gregor-test-nqa", A)  # the emulator's tag is the namespace


def test_netem_words_become_an_impairment():
    impairment, rate = netfaults.parse_netem("delay 200ms 50ms distribution normal loss 5% duplicate 2% rate 256kbit")
    assert impairment == Impairment(delay_ms=200, jitter_ms=50, loss_pct=5, duplicate_pct=2)
    assert rate == "256kbit"
    assert netfaults.parse_netem("reorder 30% 50% delay 50ms 10ms")[0] == Impairment(50, 10, 0, 0, 30)


@pytest.mark.parametrize(
    "spec, says", [("delay 100", "in ms"), ("loss x%", "not a number"), ("corrupt 1%", "cannot emulate 'corrupt'")]
)
def test_a_spec_it_cannot_emulate_is_one_clear_error(spec, says):
    with pytest.raises(GregorError, match=says):
        netfaults.parse_netem(spec)


def test_hold_times_follow_delay_jitter_and_reorder():
    rng = random.Random(1)
    plain = [hold_seconds(Impairment(delay_ms=100), rng) for _ in range(100)]
    assert set(plain) == {0.1}
    jittered = [hold_seconds(Impairment(delay_ms=100, jitter_ms=20), rng) for _ in range(4000)]
    assert 0.098 < statistics.mean(jittered) < 0.102 and 0.018 < statistics.stdev(jittered) < 0.022
    reordered = [hold_seconds(Impairment(delay_ms=50, reorder_pct=30), rng) for _ in range(4000)]
    assert 0.27 < reordered.count(0.0) / len(reordered) < 0.33  # let through at once: they overtake


def test_queued_packets_are_parsed_and_verdicts_packed():
    payload = bytes(range(28))
    body = (
        struct.pack("=BBH", 2, 0, 0)
        + _attr(NFQA_PACKET_HDR, struct.pack("!IHB", 41, 0x0800, 3))
        + _attr(NFQA_PAYLOAD, payload)
    )
    message = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET, 0, 0, 0) + body
    ack = struct.pack("=IHHIIi", 36, NLMSG_ERROR, 0, 1, 0, 0) + bytes(16)  # echoes the request header
    refused = struct.pack("=IHHIIi", 36, NLMSG_ERROR, 0, 2, 0, -1) + bytes(16)
    assert parse_messages(message + ack + message + refused) == ([(41, payload), (41, payload)], [(1, 0), (2, 1)])
    verdict = verdict_message(7, 41, NF_ACCEPT)
    assert struct.unpack_from("=I", verdict)[0] == len(verdict)
    assert verdict.endswith(struct.pack("!II", NF_ACCEPT, 41))
    bind = bind_message(7, seq=1)
    length, kind, flags, seq = struct.unpack_from("=IHHI", bind)
    assert (length, kind, flags & 4, seq) == (len(bind), (NFNL_SUBSYS_QUEUE << 8) | 2, 4, 1)  # config, acked
    assert struct.unpack_from("!H", bind, 18)[0] == 7  # queue, big-endian


def _bare_emulator(impairment: Impairment) -> tuple[Emulator, list]:
    """An Emulator without sockets: verdicts and sends are recorded instead."""
    emulator = Emulator.__new__(Emulator)
    emulator.impairment, emulator.rng, emulator.mtu = impairment, random.Random(3), 1500
    emulator.held, emulator.counter, emulator.stopping = [], 0, False
    log: list = []
    emulator._verdict = lambda packet_id, verdict: log.append(("verdict", packet_id, verdict))
    emulator._send = lambda packet, copies: log.append(("send", len(packet), copies))
    return emulator, log


def test_a_delayed_packet_is_taken_over_and_sent_when_due():
    """DROP at once (TCP's small-queue budget is freed), our copy when due; a
    datagram longer than the link keeps the kernel's packet and gets ACCEPT."""
    emulator, log = _bare_emulator(Impairment(delay_ms=30))
    small, large = bytes([0x45]) + bytes(99), bytes([0x45]) + bytes(3999)
    emulator._admit(1, small)
    emulator._admit(2, large)
    assert log == [("verdict", 1, NF_DROP)]
    emulator._release_due(emulator.held[0][0] - 0.001)
    assert len(log) == 1  # not due yet
    emulator._release_due(max(due for due, *_ in emulator.held))
    assert log[1:] == [("send", 100, 1), ("verdict", 2, NF_ACCEPT)]
    emulator, log = _bare_emulator(Impairment(duplicate_pct=100))
    emulator._admit(3, small)  # no delay: ACCEPT plus one copy
    assert log == [("verdict", 3, NF_ACCEPT), ("send", 100, 1)]
    emulator, log = _bare_emulator(Impairment(delay_ms=30, loss_pct=100))
    emulator._admit(4, small)
    assert log == [("verdict", 4, NF_DROP)] and emulator.held == []


def test_cleanup_finds_emulators_by_exact_namespace_or_by_lab_prefix():
    """A process that looks like the emulator of namespace "nqab" (it only sleeps)."""
    fake = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; print('ready', flush=True); time.sleep(60)",
            "harness.nfqueue_netem",
            "--tag",
            "nqab",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert fake.stdout.readline() == b"ready\n"  # its cmdline is the new one by now
        assert emulators("nqa") == []  # clear_netem("nqa") leaves "nqab" alone
        assert emulators("nqab") == [fake.pid]
        assert emulators("nqa", prefix=True) == [fake.pid]
        assert stop_emulators("nqab") == 1
        assert emulators("nqab") == [] and fake.poll() is not None
    finally:
        fake.kill()


# --- real packets -------------------------------------------------------------


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture
def pair():
    """Two namespaces of our own on one veth pair (eth0 in each)."""
    for ns in (A, B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    try:
        _sh("ip", "netns", "add", A)
        _sh("ip", "netns", "add", B)
        _sh("ip", "link", "add", "nqva", "type", "veth", "peer", "name", "nqvb")
        for ns, dev, ip in ((A, "nqva", A_IP), (B, "nqvb", B_IP)):
            _sh("ip", "link", "set", dev, "netns", ns)
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "name", "eth0")
            _sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield
    finally:
        NODE_A.clear_netem()
        for ns in (A, B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


_ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5000)); s.listen(); print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while (d := c.recv(64)):
    c.sendall(d)
"""
_PING = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 5000), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for line in sys.stdin:
    rtts = []
    for _ in range(int(line)):
        started = time.monotonic(); s.sendall(b"x"); s.recv(64); rtts.append((time.monotonic() - started) * 1000)
    print(" ".join(map(str, rtts)), flush=True)
"""
# Prints every datagram that reached B's port 5001, in arrival order
# (duplicates too). It ends after argv[2] seconds in which nothing arrived
# (up to 30 s for the first datagram), not after a fixed window, so a
# sender that starts or runs late on a loaded machine is still counted whole.
_RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 5001))
print("ready", flush=True)
order = []
s.settimeout(30)
try:
    while True:
        order.append(s.recv(64).decode())
        s.settimeout(float(sys.argv[2]))
except socket.timeout:
    pass
print(" ".join(order), flush=True)
"""


def _in(ns: str, script: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", script, *args], text=True, **popen)


@pytest.mark.lab
@needs_root
def test_emulated_delay_is_measured_and_cleared(pair):
    echo = _in(B, _ECHO, B_IP, stdout=subprocess.PIPE)
    assert echo.stdout.readline().strip() == "ready"
    ping = _in(A, _PING, B_IP, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def round_trips_ms(count: int) -> list[float]:
        ping.stdin.write(f"{count}\n")
        ping.stdin.flush()
        return [float(word) for word in ping.stdout.readline().split()]

    def round_trip_ms() -> float:
        return statistics.median(round_trips_ms(20))

    try:
        before = round_trip_ms()
        NODE_A.netem("delay 100ms")  # only A's outgoing packets: +100 ms per round trip
        during = round_trip_ms()
        NODE_A.netem("delay 100ms 30ms distribution normal")
        jittered = round_trips_ms(40)  # one delayed packet each: the normal draws themselves
        NODE_A.clear_netem()
        after = round_trip_ms()
    finally:
        ping.kill()
        echo.kill()
    assert before < 10
    assert 90 <= during - before <= 150, (before, during)
    assert 80 <= statistics.median(jittered) - before <= 130, jittered
    assert 15 <= statistics.stdev(jittered) <= 50, jittered
    assert after < 10
    assert emulators(A) == []
    assert (
        "NFQUEUE"
        not in subprocess.run(
            ["ip", "netns", "exec", A, "iptables", "-S", netfaults.CHAIN_NETEM], capture_output=True, text=True
        ).stdout
    )


_SINK = """
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 5002)); s.listen(); print("ready", flush=True)
c, _ = s.accept(); n = 0
while (d := c.recv(1 << 16)):
    n += len(d)
print(n, flush=True)
"""
_BULK = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 5002)); buf = b"x" * 65536; end = time.monotonic() + 2
while time.monotonic() < end:
    s.sendall(buf)
"""


@pytest.mark.lab
@needs_root
def test_a_delayed_tcp_flow_keeps_its_throughput(pair):
    """Held kernel packets would stall TCP at a few packets per round trip
    (0.3 MB/s at 20 ms); taken-over packets leave it at tens of MB/s."""
    NODE_A.netem("delay 20ms")
    sink = _in(B, _SINK, B_IP, stdout=subprocess.PIPE)
    assert sink.stdout.readline().strip() == "ready"
    started = time.monotonic()
    subprocess.run(["ip", "netns", "exec", A, sys.executable, "-c", _BULK, B_IP], check=True, timeout=30)
    received = int(sink.communicate(timeout=30)[0])
    assert received / (time.monotonic() - started) > 3e6, received


def _send_numbered_datagrams(count: int) -> None:
    """From A to B's port 5001: datagrams "0", "1", ... 2 ms apart."""
    sender = (
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for i in range({count}):\n    s.sendto(str(i).encode(), ('{B_IP}', 5001)); time.sleep(0.002)\n"
    )
    subprocess.run(["ip", "netns", "exec", A, sys.executable, "-c", sender], check=True, timeout=30)


@pytest.mark.lab
@needs_root
def test_emulated_reordering_lets_packets_overtake(pair):
    """reorder 30% with delay 50ms: the undelayed 30% arrive before earlier packets."""
    sent = 300
    NODE_A.netem("delay 50ms reorder 30%")
    counter = _in(B, _RECEIVE, B_IP, "1.5", stdout=subprocess.PIPE)
    assert counter.stdout.readline().strip() == "ready"
    _send_numbered_datagrams(sent)
    order = [int(word) for word in counter.communicate(timeout=30)[0].split()]
    assert sorted(order) == list(range(sent))  # none lost, none doubled
    overtaken = sum(1 for earlier, later in zip(order, order[1:]) if later < earlier)
    assert 0.1 * sent <= overtaken <= 0.5 * sent, overtaken


@pytest.mark.lab
@needs_root
def test_emulated_duplication_sends_extra_copies(pair):
    if netns.netem_available():
        pytest.skip("the kernel's own netem is used here; this test is about the emulation")
    sent = 400
    NODE_A.netem("duplicate 50%")
    counter = _in(B, _RECEIVE, B_IP, "1.5", stdout=subprocess.PIPE)
    assert counter.stdout.readline().strip() == "ready"
    _send_numbered_datagrams(sent)
    received = len(counter.communicate(timeout=30)[0].split())
    assert 1.35 * sent <= received <= 1.65 * sent, received  # 50% +- about 7 standard deviations


@pytest.mark.lab
@needs_root
def test_a_crashed_harness_leaves_no_emulator_after_lab_style_cleanup(pair):
    """The emulator outlives the harness that started it; the sweep by name prefix ends it."""
    NODE_A.netem("delay 20ms")
    assert len(emulators(A)) == 1
    assert stop_emulators("nq", prefix=True) == 1  # what Lab.down does with "<lab>-"
    assert emulators("nq", prefix=True) == []
