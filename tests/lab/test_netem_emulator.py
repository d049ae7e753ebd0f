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

import pytest

from harness import netns
from harness.errors import GregorError
from harness.nfqueue_netem import (NF_ACCEPT, NFQA_PACKET_HDR, NFQA_PAYLOAD, NFQNL_MSG_PACKET, NFNL_SUBSYS_QUEUE,
                                   Impairment, _attr, hold_seconds, parse_packets, verdict_message)
from lab.helpers import needs_root

A, B = "nqa", "nqb"
A_IP, B_IP = "10.77.0.1", "10.77.0.2"


def test_netem_words_become_an_impairment():
    impairment, rate = netns.parse_netem("delay 200ms 50ms distribution normal loss 5% duplicate 2% rate 256kbit")
    assert impairment == Impairment(delay_ms=200, jitter_ms=50, loss_pct=5, duplicate_pct=2)
    assert rate == "256kbit"
    assert netns.parse_netem("reorder 30% 50% delay 50ms 10ms")[0] == Impairment(50, 10, 0, 0, 30)


@pytest.mark.parametrize("spec, says", [("delay 100", "in ms"), ("loss x%", "not a number"),
                                        ("corrupt 1%", "cannot emulate 'corrupt'")])
def test_a_spec_it_cannot_emulate_is_one_clear_error(spec, says):
    with pytest.raises(GregorError, match=says):
        netns.parse_netem(spec)


def test_hold_times_follow_delay_jitter_and_reorder():
    rng = random.Random(1)
    plain = [hold_seconds(Impairment(delay_ms=100), rng) for _ in range(100)]
    assert set(plain) == {0.1}
    jittered = [hold_seconds(Impairment(delay_ms=100, jitter_ms=20), rng) for _ in range(4000)]
    assert 0.098 < statistics.mean(jittered) < 0.102 and 0.018 < statistics.stdev(jittered) < 0.022
    reordered = [hold_seconds(Impairment(delay_ms=50, reorder_pct=30), rng) for _ in range(4000)]
    assert 0.27 < reordered.count(0.0) / len(reordered) < 0.33     # let through at once: they overtake


def test_queued_packets_are_parsed_and_verdicts_packed():
    payload = bytes(range(28))
    body = struct.pack("=BBH", 2, 0, 0) + _attr(NFQA_PACKET_HDR, struct.pack("!IHB", 41, 0x0800, 3)) \
        + _attr(NFQA_PAYLOAD, payload)
    message = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET, 0, 0, 0) + body
    assert parse_packets(message + message) == [(41, payload), (41, payload)]
    verdict = verdict_message(7, 41, NF_ACCEPT)
    assert struct.unpack_from("=I", verdict)[0] == len(verdict)
    assert verdict.endswith(struct.pack("!II", NF_ACCEPT, 41))


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
        netns.clear_netem(A)
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
import socket, statistics, sys, time
s = socket.create_connection((sys.argv[1], 5000), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for line in sys.stdin:
    rtts = []
    for _ in range(15):
        started = time.monotonic(); s.sendall(b"x"); s.recv(64); rtts.append((time.monotonic() - started) * 1000)
    print(statistics.median(rtts), flush=True)
"""
_COUNT = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 5001)); s.settimeout(0.3)
print("ready", flush=True)
got, end = 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        s.recv(64); got += 1
    except socket.timeout:
        pass
print(got, flush=True)
"""


def _in(ns: str, script: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", script, *args], text=True, **popen)


@pytest.mark.lab
@needs_root
def test_emulated_delay_is_measured_and_cleared(pair):
    echo = _in(B, _ECHO, B_IP, stdout=subprocess.PIPE)
    assert echo.stdout.readline().strip() == "ready"
    ping = _in(A, _PING, B_IP, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def round_trip_ms() -> float:
        ping.stdin.write("go\n")
        ping.stdin.flush()
        return float(ping.stdout.readline())

    try:
        before = round_trip_ms()
        netns.set_netem(A, "delay 100ms")      # only A's outgoing packets: +100 ms per round trip
        during = round_trip_ms()
        netns.clear_netem(A)
        after = round_trip_ms()
    finally:
        ping.kill()
        echo.kill()
    assert before < 10
    assert 90 <= during - before <= 150, (before, during)
    assert after < 10
    assert netns.emulator_pids(A) == []
    assert "NFQUEUE" not in subprocess.run(["ip", "netns", "exec", A, "iptables", "-S", netns.CHAIN_NETEM],
                                           capture_output=True, text=True).stdout


@pytest.mark.lab
@needs_root
def test_emulated_duplication_sends_extra_copies(pair):
    if netns.netem_available():
        pytest.skip("the kernel's own netem is used here; this test is about the emulation")
    sent = 400
    netns.set_netem(A, "duplicate 50%")
    counter = _in(B, _COUNT, B_IP, "4", stdout=subprocess.PIPE)
    assert counter.stdout.readline().strip() == "ready"
    sender = "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n" \
             f"for i in range({sent}):\n    s.sendto(b'x', ('{B_IP}', 5001)); time.sleep(0.002)\n"
    subprocess.run(["ip", "netns", "exec", A, sys.executable, "-c", sender], check=True, timeout=30)
    received = int(counter.communicate(timeout=30)[0])
    assert 1.35 * sent <= received <= 1.65 * sent, received    # 50% +- about 7 standard deviations


@pytest.mark.lab
@needs_root
def test_a_crashed_harness_leaves_no_emulator_after_lab_style_cleanup(pair):
    """The emulator outlives the harness that started it; the sweep by name prefix ends it."""
    netns.set_netem(A, "delay 20ms")
    assert len(netns.emulator_pids(A)) == 1
    assert netns.stop_emulators("nq") == 1       # what Lab.down does with "<lab>-"
    assert netns.emulator_pids("nq") == []
