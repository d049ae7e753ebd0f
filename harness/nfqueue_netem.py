"""netem in userspace, for kernels built without the sch_netem qdisc.

Why: some VM kernels (this project's CI among them) have no netem, so tc
cannot delay, duplicate or reorder packets. They do have NFQUEUE: an
iptables rule hands each outgoing packet to this process, which gives the
kernel its verdict only when the packet is due. Holding verdicts delays the
packet; due times drawn with jitter (or a reordered packet let through at
once) make packets overtake each other; a duplicated packet is accepted and
its bytes sent once more through a raw socket, marked so that the rule lets
the copy pass. The rule is added with --queue-bypass and the queue with
fail-open, so a dead or overloaded emulator lets traffic flow rather than
cutting the link.

Run inside one node's namespace (``harness.netns.set_netem`` starts it):

    python -m harness.nfqueue_netem --tag NS --queue 7 --delay-ms 100 --jitter-ms 20
"""

from __future__ import annotations

import argparse
import errno
import heapq
import random
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_FAIL_OPEN = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD = 1, 2, 10
NF_DROP, NF_ACCEPT = 0, 1
SO_MARK = 36
# Copies we send ourselves carry this mark; the NFQUEUE rule skips it.
DUPLICATE_MARK = 0x4752
QUEUE_MAXLEN = 20000


@dataclass(frozen=True)
class Impairment:
    """What to do to each packet; zero turns a feature off."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    duplicate_pct: float = 0.0
    reorder_pct: float = 0.0

    def args(self) -> list[str]:
        return ["--delay-ms", f"{self.delay_ms:g}", "--jitter-ms", f"{self.jitter_ms:g}",
                "--loss-pct", f"{self.loss_pct:g}", "--duplicate-pct", f"{self.duplicate_pct:g}",
                "--reorder-pct", f"{self.reorder_pct:g}"]


def hold_seconds(impairment: Impairment, rng: random.Random) -> float:
    """How long one packet is held: the delay with normal jitter, never negative;
    a reordered packet (netem's meaning: sent at once) is not held."""
    if impairment.reorder_pct and rng.random() * 100 < impairment.reorder_pct:
        return 0.0
    delay = impairment.delay_ms
    if impairment.jitter_ms:
        delay = rng.gauss(delay, impairment.jitter_ms)
    return max(0.0, delay) / 1000.0


# --- nfnetlink messages ------------------------------------------------------

def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg: int, queue: int, attrs: bytes, seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, NLM_F_REQUEST, seq, 0) + body


def bind_message(queue: int) -> bytes:
    return _message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))


def params_message(queue: int) -> bytes:
    """Copy whole packets (duplicates need the bytes), a long queue, fail open."""
    return _message(NFQNL_MSG_CONFIG, queue,
                    _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET))
                    + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
                    + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
                    + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)))


def verdict_message(queue: int, packet_id: int, verdict: int) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue, _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))


def parse_packets(data: bytes) -> list[tuple[int, bytes]]:
    """(packet id, payload) of every queued packet in one netlink read.

    Raises OSError for a netlink error reply (e.g. binding refused)."""
    packets, offset = [], 0
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", data, offset + 16)
            if code:
                raise OSError(-code, f"nfnetlink_queue refused a request: {errno.errorcode.get(-code, code)}")
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            packet_id, payload = None, b""
            at, end = offset + 20, offset + length
            while at + 4 <= end:
                attr_len, attr_kind = struct.unpack_from("=HH", data, at)
                if attr_len < 4:
                    break
                value = data[at + 4:at + attr_len]
                attr_kind &= 0x7FFF
                if attr_kind == NFQA_PACKET_HDR:
                    (packet_id,) = struct.unpack_from("!I", value)
                elif attr_kind == NFQA_PAYLOAD:
                    payload = value
                at += attr_len + (-attr_len % 4)
            if packet_id is not None:
                packets.append((packet_id, payload))
        offset += length + (-length % 4)
    return packets


# --- the loop ----------------------------------------------------------------

class Emulator:
    """Holds each queued packet until it is due, then accepts (or drops) it."""

    def __init__(self, queue: int, impairment: Impairment, seed: int):
        self.queue = queue
        self.impairment = impairment
        self.rng = random.Random(seed)
        self.held: list[tuple[float, int, int, bytes | None]] = []
        self.counter = 0
        self.nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.nl.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.nl.bind((0, 0))
        self.raw = None
        if impairment.duplicate_pct:
            self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self.raw.setsockopt(socket.SOL_SOCKET, SO_MARK, DUPLICATE_MARK)
        for request in (bind_message(queue), params_message(queue)):
            self.nl.send(request)
        self.nl.setblocking(False)
        self.stopping = False

    def _admit(self, packet_id: int, payload: bytes) -> None:
        if self.impairment.loss_pct and self.rng.random() * 100 < self.impairment.loss_pct:
            self.nl.send(verdict_message(self.queue, packet_id, NF_DROP))
            return
        copy = payload if self.raw and self.rng.random() * 100 < self.impairment.duplicate_pct else None
        due = time.monotonic() + hold_seconds(self.impairment, self.rng)
        self.counter += 1
        heapq.heappush(self.held, (due, self.counter, packet_id, copy))

    def _release_due(self, now: float) -> None:
        while self.held and (self.stopping or self.held[0][0] <= now):
            _, _, packet_id, copy = heapq.heappop(self.held)
            self.nl.send(verdict_message(self.queue, packet_id, NF_ACCEPT))
            if copy is not None and len(copy) >= 20:
                destination = socket.inet_ntoa(copy[16:20])
                try:
                    self.raw.sendto(copy, (destination, 0))
                except OSError:
                    pass  # a lost copy is still a copy netem could have lost

    def run(self) -> None:
        while not self.stopping:
            timeout = max(0.0, self.held[0][0] - time.monotonic()) if self.held else 0.5
            readable, _, _ = select.select([self.nl], [], [], timeout)
            if readable:
                while True:
                    try:
                        data = self.nl.recv(1 << 17)
                    except BlockingIOError:
                        break
                    except OSError as error:  # ENOBUFS: the kernel dropped some notices; go on
                        if error.errno == errno.ENOBUFS:
                            break
                        raise
                    for packet_id, payload in parse_packets(data):
                        self._admit(packet_id, payload)
            self._release_due(time.monotonic())
        self._release_due(time.monotonic())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help="the namespace it serves (lets cleanup find it)")
    parser.add_argument("--queue", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-pct", type=float, default=0.0)
    parser.add_argument("--duplicate-pct", type=float, default=0.0)
    parser.add_argument("--reorder-pct", type=float, default=0.0)
    args = parser.parse_args(argv)
    impairment = Impairment(args.delay_ms, args.jitter_ms, args.loss_pct, args.duplicate_pct, args.reorder_pct)
    emulator = Emulator(args.queue, impairment, args.seed)

    def stop(_signum, _frame):
        emulator.stopping = True  # accept everything still held, then exit

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    emulator.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
