"""Degraded links with tc netem: slow, lossy, duplicating, reordering, narrow.

Where the kernel lacks the netem qdisc, the lab emulates every profile here
in userspace (harness/nfqueue_netem.py), so the schedule can pick any.

A profile is data (so a schedule can pick one from its seed and the history
can say exactly what was applied); `spec()` is the netem argument text the
lab's Node.netem() takes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ground.errors import GregorError
from ground.faults import NETEM
from nemesis.values import fault_value


@dataclass(frozen=True)
class NetemProfile:
    """One netem setting; zero means the feature is off."""

    name: str
    delay_ms: int = 0
    jitter_ms: int = 0
    loss_pct: float = 0.0
    duplicate_pct: float = 0.0
    reorder_pct: float = 0.0
    rate_kbit: int = 0

    def spec(self) -> str:
        parts = []
        if self.delay_ms:
            parts.append(f"delay {self.delay_ms}ms")
            if self.jitter_ms:
                parts.append(f"{self.jitter_ms}ms distribution normal")
        if self.loss_pct:
            parts.append(f"loss {self.loss_pct:g}%")
        if self.duplicate_pct:
            parts.append(f"duplicate {self.duplicate_pct:g}%")
        if self.reorder_pct:
            # netem reorders only delayed packets: the rest jump the queue
            if not self.delay_ms:
                raise GregorError(f"netem profile {self.name!r}: reordering needs a delay")
            parts.append(f"reorder {self.reorder_pct:g}% 50%")
        if self.rate_kbit:
            parts.append(f"rate {self.rate_kbit}kbit")
        if not parts:
            raise GregorError(f"netem profile {self.name!r} changes nothing")
        return " ".join(parts)

    def value(self) -> dict:
        return {"profile": self.name, "netem": self.spec()}


# Strong enough to upset Kafka's timeouts (request.timeout, replica lag)
# without making every request fail outright.
PROFILES = {
    "delay": NetemProfile("delay", delay_ms=200, jitter_ms=50),
    "loss": NetemProfile("loss", loss_pct=20),
    "duplicate": NetemProfile("duplicate", duplicate_pct=20),
    "reorder": NetemProfile("reorder", delay_ms=50, jitter_ms=10, reorder_pct=30),
    "rate": NetemProfile("rate", rate_kbit=256),
    "mixed": NetemProfile("mixed", delay_ms=100, jitter_ms=30, loss_pct=5, duplicate_pct=2),
}


def usable_profiles() -> list[str]:
    """Every profile: the lab applies each with the qdisc or its emulation."""
    return sorted(PROFILES)


def pick_profile(rng: random.Random, profiles=None) -> str:
    return rng.choice(sorted(profiles or PROFILES))


def apply(lab, node_names, profile: NetemProfile) -> dict:
    """Applies the profile to each node; returns {node: qdisc or emulation}."""
    return {name: lab.node(name).netem(profile.spec()) for name in node_names}


def clear(lab, node_names) -> None:
    for name in node_names:
        lab.node(name).clear_netem()


# --- the fault (ground/faults.py: netem) ---------------------------------------


def start(nemesis, step, target):
    profile = PROFILES[step.profile or "delay"]
    entry = nemesis.ledger.add({"fault": NETEM, "nodes": list(target.nodes), "role": target.role})
    applied_by = apply(nemesis.lab, target.nodes, profile)
    return entry, fault_value(target.nodes, role=target.role, **profile.value(), applied_by=applied_by)


def heal(lab, entry: dict) -> dict:
    nodes = list(entry.get("nodes", []))
    clear(lab, nodes)
    return {"cleared": nodes}
