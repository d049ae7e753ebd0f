"""netem in userspace, for kernels built without the sch_netem qdisc.

Why: some VM kernels (this project's CI among them) have no netem, so tc
cannot delay, duplicate or reorder packets. They do have NFQUEUE: an
iptables rule hands each outgoing packet (its bytes) to this process.

A delayed packet is taken over: its verdict is DROP at once and its bytes
are sent again through a raw socket when due, marked so that the rule lets
them pass. Holding the kernel's packet instead would also delay it, but
TCP counts a packet it has not seen leave against its small send budget
(TCP Small Queues), which throttles a delayed flow to a few packets per
round trip; netem itself detaches packets from their socket for the same
reason. Due times drawn with jitter (or a reordered packet let through at
once) make packets overtake each other; a duplicated packet is sent twice;
a lost one is dropped. Packets too long for the link (unfragmented large
datagrams) keep the kernel's packet and get ACCEPT when due. The rule is
added with --queue-bypass and the queue fails open, so a dead or
overloaded emulator lets traffic flow rather than cutting the link.

Runs on the node it impairs, standard library only, so it is copied to
nodes as one file (harness/netfaults.py starts it through the node's exec):

    python3 nfqueue_netem.py --tag NODE --queue 7 --delay-ms 100 --jitter-ms 20
    python3 nfqueue_netem.py --stop --tag NODE      # ends it (also a crashed run's)
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import heapq
import os
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
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_FAIL_OPEN = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD = 1, 2, 10
NF_DROP, NF_ACCEPT = 0, 1
SO_MARK = 36
SIOCGIFMTU = 0x8921
# Packets we send ourselves carry this mark; the NFQUEUE rule skips it.
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
        return [
            "--delay-ms",
            f"{self.delay_ms:g}",
            "--jitter-ms",
            f"{self.jitter_ms:g}",
            "--loss-pct",
            f"{self.loss_pct:g}",
            "--duplicate-pct",
            f"{self.duplicate_pct:g}",
            "--reorder-pct",
            f"{self.reorder_pct:g}",
        ]


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


def _message(msg: int, queue: int, attrs: bytes, seq: int = 0, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def bind_message(queue: int, seq: int = 1) -> bytes:
    """Asks for an acknowledgement, so a refused bind fails at start, not later."""
    return _message(
        NFQNL_MSG_CONFIG,
        queue,
        _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)),
        seq,
        NLM_F_REQUEST | NLM_F_ACK,
    )


def params_message(queue: int, seq: int = 2) -> bytes:
    """Copy whole packets (duplicates need the bytes), a long queue, fail open."""
    return _message(
        NFQNL_MSG_CONFIG,
        queue,
        _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET))
        + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
        + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
        + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
        seq,
        NLM_F_REQUEST | NLM_F_ACK,
    )


def verdict_message(queue: int, packet_id: int, verdict: int) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue, _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))


def parse_messages(data: bytes) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]:
    """From one netlink read: (packet id, payload) of every queued packet, and
    (sequence number, errno) of every acknowledgement (errno 0) or error reply."""
    packets, replies, offset = [], [], 0
    while offset + 16 <= len(data):
        length, kind, _flags, seq = struct.unpack_from("=IHHI", data, offset)
        if length < 16:
            break
        if kind == NLMSG_ERROR and length >= 20:
            (code,) = struct.unpack_from("=i", data, offset + 16)
            replies.append((seq, -code))
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            packet_id, payload = None, b""
            at, end = offset + 20, offset + length
            while at + 4 <= end:
                attr_len, attr_kind = struct.unpack_from("=HH", data, at)
                if attr_len < 4:
                    break
                value = data[at + 4 : at + attr_len]
                attr_kind &= 0x7FFF
                if attr_kind == NFQA_PACKET_HDR:
                    (packet_id,) = struct.unpack_from("!I", value)
                elif attr_kind == NFQA_PAYLOAD:
                    payload = value
                at += attr_len + (-attr_len % 4)
            if packet_id is not None:
                packets.append((packet_id, payload))
        offset += length + (-length % 4)
    return packets, replies


# --- the loop ----------------------------------------------------------------


class Emulator:
    """Takes over each queued packet and sends it when due (or drops it)."""

    def __init__(self, queue: int, impairment: Impairment, seed: int, device: str = "eth0"):
        self.queue = queue
        self.impairment = impairment
        self.rng = random.Random(seed)
        # (due, order, bytes to send or None, kernel packet id to accept or None, copies)
        self.held: list[tuple[float, int, bytes | None, int | None, int]] = []
        self.counter = 0
        self.refused = 0  # verdicts the kernel no longer wanted (e.g. the device went away)
        self.stopping = False
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.raw.setsockopt(socket.SOL_SOCKET, SO_MARK, DUPLICATE_MARK)
        self.raw.setblocking(False)
        request = struct.pack("16si", device.encode(), 0)
        self.mtu = struct.unpack_from("16xi", fcntl.ioctl(self.raw, SIOCGIFMTU, request))[0]
        self.nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.nl.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.nl.bind((0, 0))
        self.nl.settimeout(5)
        for seq, request in ((1, bind_message(queue, 1)), (2, params_message(queue, 2))):
            self.nl.send(request)
            self._await_ack(seq)
        self.nl.setblocking(False)
        # SIGTERM must wake the select at once (it is retried after a handler otherwise).
        self.wake_r, self._wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno())

    def _await_ack(self, seq: int) -> None:
        while True:
            packets, replies = parse_messages(self.nl.recv(1 << 17))
            for packet_id, payload in packets:  # a stale rule may already queue packets
                self._admit(packet_id, payload)
            for reply_seq, code in replies:
                if reply_seq == seq:
                    if code:
                        raise OSError(
                            code, f"nfnetlink_queue refused queue {self.queue}: {errno.errorcode.get(code, code)}"
                        )
                    return

    def _verdict(self, packet_id: int, verdict: int) -> None:
        self.nl.send(verdict_message(self.queue, packet_id, verdict))

    def _send(self, packet: bytes, copies: int) -> None:
        destination = socket.inet_ntoa(packet[16:20])
        for _ in range(copies):
            try:
                self.raw.sendto(packet, (destination, 0))
            except OSError:
                pass  # a full device queue loses it, as netem's own queue would

    def _admit(self, packet_id: int, payload: bytes) -> None:
        impairment, rng = self.impairment, self.rng
        if impairment.loss_pct and rng.random() * 100 < impairment.loss_pct:
            self._verdict(packet_id, NF_DROP)
            return
        copies = 2 if impairment.duplicate_pct and rng.random() * 100 < impairment.duplicate_pct else 1
        hold = hold_seconds(impairment, rng)
        fits = 20 <= len(payload) <= self.mtu and payload[0] >> 4 == 4
        if not fits:  # keep the kernel's packet (no copy could be sent)
            if hold:
                self._push(hold, None, packet_id, 1)
            else:
                self._verdict(packet_id, NF_ACCEPT)
        elif hold:
            self._verdict(packet_id, NF_DROP)  # ours now; the socket's budget is freed
            self._push(hold, payload, None, copies)
        else:
            self._verdict(packet_id, NF_ACCEPT)
            if copies > 1:
                self._send(payload, copies - 1)

    def _push(self, hold: float, payload: bytes | None, packet_id: int | None, copies: int) -> None:
        self.counter += 1
        heapq.heappush(self.held, (time.monotonic() + hold, self.counter, payload, packet_id, copies))

    def _release_due(self, now: float) -> None:
        while self.held and (self.stopping or self.held[0][0] <= now):
            _, _, payload, packet_id, copies = heapq.heappop(self.held)
            if payload is not None:
                self._send(payload, copies)
            else:
                self._verdict(packet_id, NF_ACCEPT)

    def _read_queue(self) -> None:
        """Everything the kernel queued so far; held (or, when stopping, let go at once)."""
        while True:
            try:
                data = self.nl.recv(1 << 17)
            except BlockingIOError:
                return
            except OSError as error:  # ENOBUFS: the kernel dropped some notices; go on
                if error.errno == errno.ENOBUFS:
                    return
                raise
            packets, replies = parse_messages(data)
            self.refused += sum(1 for _, code in replies if code)
            for packet_id, payload in packets:
                if self.stopping:
                    self._verdict(packet_id, NF_ACCEPT)
                else:
                    self._admit(packet_id, payload)

    def run(self) -> None:
        while not self.stopping:
            timeout = max(0.0, self.held[0][0] - time.monotonic()) if self.held else None
            readable, _, _ = select.select([self.nl, self.wake_r], [], [], timeout)
            if self.nl in readable:
                self._read_queue()
            self._release_due(time.monotonic())
        # Leave nothing behind: packets unread at exit would be dropped by the kernel.
        self._release_due(time.monotonic())
        self._read_queue()


def emulators(tag: str, prefix: bool = False) -> list[int]:
    """Pids of the emulators serving `tag` (prefix=True: every tag starting
    with it), found in /proc, so those of a crashed harness are found too."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
        except OSError:
            continue
        if "--tag" not in argv[:-1] or not any(
            arg.endswith("nfqueue_netem.py") or arg == "harness.nfqueue_netem" for arg in argv
        ):
            continue
        served = argv[argv.index("--tag") + 1]
        if served == tag or (prefix and served.startswith(tag)):
            found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reaps it if it is our own child
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def stop_emulators(tag: str, prefix: bool = False) -> int:
    """SIGTERM (they let held packets go), then SIGKILL what is left; how many there were."""
    pids = emulators(tag, prefix)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if _running(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return len(pids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stop",
        action="store_true",
        help="end the emulators serving --tag (with --prefix: every tag starting with it) and exit",
    )
    parser.add_argument("--prefix", action="store_true")
    parser.add_argument("--tag", required=True, help="the namespace it serves (lets cleanup find it)")
    parser.add_argument("--queue", type=int, default=7)
    parser.add_argument("--device", default="eth0", help="the link the rule watches (its MTU matters)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-pct", type=float, default=0.0)
    parser.add_argument("--duplicate-pct", type=float, default=0.0)
    parser.add_argument("--reorder-pct", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.stop:
        print(stop_emulators(args.tag, args.prefix))
        return 0
    impairment = Impairment(args.delay_ms, args.jitter_ms, args.loss_pct, args.duplicate_pct, args.reorder_pct)
    emulator = Emulator(args.queue, impairment, args.seed, args.device)

    def stop(_signum, _frame):
        emulator.stopping = True  # send everything still held, then exit

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    emulator.run()
    if emulator.refused:
        print(f"{emulator.refused} verdicts refused by the kernel", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
