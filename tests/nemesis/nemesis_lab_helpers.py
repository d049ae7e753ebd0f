"""Helpers of the nemesis lab tests: a recording context and probes that
look at the network from inside the nodes (through node.exec, on any backend)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientInfo:
    """The fields of workloads' ClientInfo the nemesis reads (RUN-API.md)."""

    process: int
    pid: int
    role: str
    txn_id: str | None = None
    group: str | None = None
    place: str | None = None
    busy_s: float | None = None


class ListContext:
    """The parts of workloads' RunContext the nemesis uses, recording to a list."""

    def __init__(self, lab, keys=None, clients=(), txn_ids=(), group_ids=()):
        self.lab = lab
        self.test = {"keys": dict(keys or {})}
        self.events: list[dict] = []
        self._clients = list(clients)
        self._txn_ids, self._group_ids = list(txn_ids), list(group_ids)
        self._lock = threading.Lock()
        self._t0 = time.monotonic_ns()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._t0

    def record(self, event: dict) -> dict:
        with self._lock:
            event = dict(event, index=len(self.events), time=self.now_ns())
            self.events.append(event)
            return event

    def clients(self):
        return list(self._clients)

    def txn_ids(self):
        return list(self._txn_ids)

    def group_ids(self):
        return list(self._group_ids)


_CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
except OSError:
    sys.exit(1)
"""


def tcp_connects(node, address: str, port: int = 9092, timeout: float = 1.5) -> bool:
    """Whether a TCP connect from `node` (a node or a client place) reaches address:port in time."""
    return (
        node.exec(
            [node.python, "-c", _CONNECT, address, str(port), str(timeout)], check=False, timeout=timeout + 20
        ).returncode
        == 0
    )


UDP_PORT = 47123
# Listens for `listen` seconds; after 1 s (every node's listener is up by
# then, even with the probes started a moment apart on a loaded machine)
# sends `count` numbered datagrams to each destination. A receive buffer of
# 4 MiB holds a whole burst while a starved listener is not scheduled.
_PROBE = """
import socket, sys, threading, time
port, listen, count, dests = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 4 << 20)
except OSError:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("0.0.0.0", port))
s.settimeout(0.2)
def send():
    time.sleep(1.0)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(count):
        for ip in dests:
            try:
                out.sendto(str(i).encode(), (ip, port))
            except PermissionError:   # dropped in OUTPUT by iptables (emulated loss)
                pass
        time.sleep(0.25 / max(count, 1))
threading.Thread(target=send, daemon=True).start()
seen, end = {}, time.monotonic() + listen
while time.monotonic() < end:
    try:
        data, (ip, _) = s.recvfrom(64)
        seen.setdefault(ip, set()).add(data)
    except socket.timeout:
        pass
print(" ".join(f"{ip}={len(d)}" for ip, d in sorted(seen.items())), flush=True)
"""


def udp_counts(lab, senders=None, count: int = 5, listen_s: float = 3.0) -> dict[tuple[str, str], int]:
    """Distinct datagrams that arrived, per directed (source, destination) pair.

    UDP needs no answer, so unlike TCP it shows one-way cuts as one-way.
    Every node runs one probe (listen, and send if it is a sender), all at once.
    """
    by_address = {n.address: n.name for n in lab.nodes}
    results: dict[str, str] = {}

    def probe(node) -> None:
        dests = [o.address for o in lab.nodes if o is not node] if senders is None or node.name in senders else []
        results[node.name] = node.exec(
            [node.python, "-c", _PROBE, str(UDP_PORT), str(listen_s), str(count), *dests], timeout=listen_s + 30
        ).stdout

    threads = [threading.Thread(target=probe, args=(node,)) for node in lab.nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    arrived = {}
    for name, out in results.items():
        for item in out.split():
            address, _, n = item.partition("=")
            if address in by_address:
                arrived[(by_address[address], name)] = int(n)
    return arrived


def udp_reachability(lab) -> set[tuple[str, str]]:
    """Every directed node pair whose datagrams arrive."""
    return set(udp_counts(lab))


def all_pairs(lab) -> set[tuple[str, str]]:
    return {(a.name, b.name) for a in lab.nodes for b in lab.nodes if a is not b}


_CONNECT_MS = """
import socket, statistics, sys, time
times = []
for _ in range(9):
    start = time.monotonic()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    times.append((time.monotonic() - start) * 1000)
print(statistics.median(times))
"""


def tcp_connect_ms(node, address: str, port: int = 9092) -> float:
    """Median TCP connect time in ms from `node` (one round trip)."""
    return float(node.exec([node.python, "-c", _CONNECT_MS, address, str(port)], timeout=120).stdout)


def gregor_run(lab, store, *args: str, timeout: float = 400, check: bool = False) -> tuple[str, list[dict], dict]:
    """Runs `gregor run` against the lab (with its check and report when `check`: then it must
    come out valid, exit 0); returns (run dir, history, test.json)."""
    import glob
    import json
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--lab",
            lab.name,
            "--backend",
            lab.backend.name,
            "--store",
            str(store),
            *([] if check else ["--no-check"]),
            *args,
        ],
        cwd=root,
        env={**os.environ, "GREGOR_LAB": lab.name},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = sorted(glob.glob(os.path.join(str(store), "*", "2*")))
    assert runs, f"no run directory under {store}"
    run_dir = runs[-1]
    with open(os.path.join(run_dir, "history.jsonl")) as handle:
        history = [json.loads(line) for line in handle if line.strip()]
    with open(os.path.join(run_dir, "test.json")) as handle:
        test = json.load(handle)
    return run_dir, history, test


def unread_acked_writes(history: list[dict]) -> set[tuple[int, int]]:
    """(key, value) of sends acknowledged (`ok`) that no `ok` poll ever returned."""
    acked, read = set(), set()
    for event in history:
        if event.get("type") != "ok":
            continue
        for mop in event.get("mops") or ():
            if mop.get("f") == "send":
                acked.add((mop["key"], mop["value"]))
            elif mop.get("f") == "poll" and "value" in mop:
                read.add((mop["key"], mop["value"]))
    return acked - read


def lost_below_read_bound(history: list[dict]) -> set[tuple[int, int]]:
    """Acknowledged writes that no `ok` poll returned although `ok` polls read
    the same key at or past the write's offset: the log moved on without them
    (lost, in docs/ANOMALIES.md's sense), whether or not the drain reached the end."""
    acked, read, bound = {}, set(), {}
    for event in history:
        if event.get("type") != "ok":
            continue
        for mop in event.get("mops") or ():
            if mop.get("f") == "send" and mop.get("offset") is not None:
                acked[(mop["key"], mop["value"])] = mop["offset"]
            elif mop.get("f") == "poll" and "value" in mop:
                read.add((mop["key"], mop["value"]))
                bound[mop["key"]] = max(bound.get(mop["key"], -1), mop["offset"])
    return {kv for kv, offset in acked.items() if kv not in read and offset <= bound.get(kv[0], -1)}
