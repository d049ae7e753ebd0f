"""Counting the packets this host's processes send to some addresses, for
tests that must show none went: iptables rules without a target (they count
and let everything pass), first in the host's OUTPUT chain, removed on exit.
What the nodes send each other (in their own namespaces, or bridged between
containers through FORWARD) is not counted: it is not Gregor's to send.

A counter that cannot count would make such a test pass for nothing: each
test shows its counter seeing packets before it relies on it seeing none.
"""

from __future__ import annotations

import itertools
import os
import subprocess

CHAINS = ("OUTPUT",)
_serial = itertools.count()


class PacketCounter:
    """with PacketCounter(["10.1.2.11"], ports=[9092]) as sent: ...; sent.count()

    ports: TCP destination ports only (None: every packet to the addresses);
    new_only: only packets that open a connection (conntrack NEW), so the
    keepalives of connections this test process already holds do not count;
    gid: only packets of sockets of processes running with that group id
    (`subprocess.run(..., group=gid)`), so a reconnect of a client an earlier
    test left in this process does not count either (one did, once)."""

    def __init__(
        self, addresses: list[str], ports: list[int] | None = None, new_only: bool = False, gid: int | None = None
    ):
        self.addresses = list(dict.fromkeys(addresses))
        self.ports = sorted(set(ports)) if ports else None
        self.new_only = new_only
        self.gid = gid
        self.tag = f"gregor-test-count-{os.getpid()}-{next(_serial)}"
        self._rules: list[tuple[str, list[str]]] = []

    def _match(self, address: str) -> list[str]:
        spec = ["-d", address]
        if self.ports:
            spec += ["-p", "tcp", "-m", "multiport", "--dports", ",".join(map(str, self.ports))]
        if self.new_only:
            spec += ["-m", "conntrack", "--ctstate", "NEW"]
        if self.gid is not None:
            spec += ["-m", "owner", "--gid-owner", str(self.gid)]
        return [*spec, "-m", "comment", "--comment", self.tag]

    def __enter__(self) -> "PacketCounter":
        for chain in CHAINS:
            for address in self.addresses:
                rule = self._match(address)
                subprocess.run(["iptables", "-w", "-I", chain, *rule], check=True, capture_output=True)
                self._rules.append((chain, rule))
        return self

    def count(self) -> int:
        """Packets counted so far, over every address and chain."""
        total = 0
        for chain in CHAINS:
            listing = subprocess.run(
                ["iptables", "-w", "-L", chain, "-v", "-x", "-n"], check=True, capture_output=True, text=True
            ).stdout
            total += sum(int(line.split()[0]) for line in listing.splitlines() if f"/* {self.tag} */" in line)
        return total

    def __exit__(self, *_exc) -> None:
        for chain, rule in self._rules:
            subprocess.run(["iptables", "-w", "-D", chain, *rule], capture_output=True)
        self._rules.clear()
