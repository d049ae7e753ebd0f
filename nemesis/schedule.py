"""The seeded plan of faults: what to break next, whom, and for how long.

A plan is an endless, reproducible sequence of steps computed from the seed
alone; the runner turns each step into real faults. Each step is a quiet
period, then a fault held for a while, then its heal, so the system gets
time to recover between faults (and the checker sees both states).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

from ground import faults
from ground.errors import GregorError
from ground.faults import NETEM, PARTITION, WIRE
from nemesis import netem
from nemesis.targets import parse_target

FAULTS = faults.INJECTABLE
DEFAULT_TARGETS = ("one", "leader", "controller", "coordinator", "minority", "majority", "all", "client")

# Faults that may hit a client target: partitions (its namespace) and pauses (its pid).
CLIENT_FAULTS = tuple(name for name in FAULTS if faults.acts_on_clients(name) and not faults.clients_only(name))
# Faults only for client targets: kill-client SIGKILLs a client process,
# which the run replaces at once (old id + concurrency).
CLIENT_ONLY_FAULTS = tuple(name for name in FAULTS if faults.clients_only(name))
# Faults whose target must be a partition's leader.
LEADER_FAULTS = tuple(name for name in FAULTS if faults.leader_only(name))
NODE_SHAPES = ("isolate", "one-way-in", "one-way-out", "majority-minority", "halves", "bridge", "ring")
CLIENT_SHAPES = ("client", "client-one-way", "client-deaf")


@dataclass(frozen=True)
class Step:
    fault: str
    target: str
    quiet_s: float
    hold_s: float
    shape: str | None = None  # partition shape
    profile: str | None = None  # netem profile name
    rule: str | None = None  # wire rule, as --wire-rule gave it

    def intent(self) -> dict:
        """What the invoke says the nemesis is about to do."""
        out = {"target": self.target}
        if self.shape:
            out["shape"] = self.shape
        if self.profile:
            out["profile"] = self.profile
        if self.rule:
            out["rule"] = self.rule
        return out


def parse_faults(text: str) -> list[str]:
    """'partition,kill' -> ['partition', 'kill']; 'none' -> []."""
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    if names == ["none"] or not names:
        return []
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise GregorError(f"unknown nemesis fault {unknown[0]!r}; use none or a comma list of {', '.join(FAULTS)}")
    return list(dict.fromkeys(names))


def parse_targets(text: str) -> list[str]:
    """'leader,one' -> ['leader', 'one'], each checked."""
    names = [t for t in str(text).split(",") if t.strip()]
    if not names:
        raise GregorError("--nemesis-targets is empty; name at least one of " + ", ".join(DEFAULT_TARGETS))
    return list(dict.fromkeys(parse_target(t) for t in names))


def wire_broker_sources(targets) -> bool:
    """Whether wire faults aim at the brokers' own requests: only when --nemesis-targets names a
    node target (coordinator, leader, node:n2, all, ...); with the default targets they aim at
    clients only, as before broker sources existed."""
    if targets is None or list(targets) == list(DEFAULT_TARGETS):
        return False
    return any(not target.startswith("client") for target in targets)


def wire_client_sources(targets) -> bool:
    """Whether wire faults aim at the run's clients (the default, or a client target named)."""
    return not wire_broker_sources(targets) or any(target.startswith("client") for target in targets)


def applies(fault: str, target: str) -> bool:
    if fault in LEADER_FAULTS:
        return target.split(":")[0] == "leader"
    if fault in CLIENT_ONLY_FAULTS:
        return target.startswith("client")
    return fault in CLIENT_FAULTS or not target.startswith("client")


def check_shape(shape: str | None, targets) -> None:
    """A fixed partition shape must fit every target it may meet."""
    if shape is None:
        return
    if shape not in NODE_SHAPES + CLIENT_SHAPES:
        raise GregorError(f"unknown partition shape {shape!r}; use one of {', '.join(NODE_SHAPES + CLIENT_SHAPES)}")
    client_shape = shape in CLIENT_SHAPES
    for target in targets:
        if target.startswith("client") != client_shape:
            raise GregorError(
                f"partition shape {shape!r} does not fit target {target!r} "
                f"({'client' if client_shape else 'node'} shapes need "
                f"{'client' if client_shape else 'node'} targets)"
            )


def partition_shape(target: str, rng: random.Random) -> str:
    """The cut that fits a target: one node is isolated or cut one way;
    a minority/majority target splits the cluster; 'all' gets the complex
    shapes (halves, bridge, ring); a client is cut from every node."""
    kind = target.split(":")[0]
    if kind == "client":
        return rng.choice(["client", "client-one-way"])
    if kind in ("minority", "majority"):
        return "majority-minority"
    if kind == "all":
        return rng.choice(["halves", "bridge", "ring"])
    return rng.choice(["isolate", "one-way-in", "one-way-out"])


def plan(
    faults,
    targets,
    seed: int,
    interval_s: float,
    profiles=None,
    node_faults=None,
    shape: str | None = None,
    hold_s: float | None = None,
    wire_rules=(),
) -> Iterator[Step]:
    """Yields steps forever; the same arguments give the same steps.

    profiles: the netem profiles this machine can apply (all by default).
    node_faults: the faults the lab's system takes on its nodes (all by
    default); the others only hit client targets (kfake's one node cannot be
    partitioned from peers, an external cluster's brokers are not ours).
    shape: every partition has this shape; hold_s: every fault is held this
    long (a claim whose fault must outlast one timeout and not another).
    wire_rules: the rules a wire fault switches on, one drawn per step.
    """
    if interval_s <= 0:
        raise GregorError(f"--nemesis-interval must be positive, got {interval_s}")
    rng = random.Random(f"nemesis-plan:{seed}")
    faults = list(faults)
    if not faults:
        return
    if WIRE in faults and not wire_rules:
        raise GregorError("--nemesis wire needs a rule to switch on: --wire-rule RULE, e.g. delay:api=EndTxn:ms=3000")
    brokers = wire_broker_sources(targets)
    pairs = [
        (f, t)
        for f in faults
        for t in targets
        if applies(f, t)
        and (node_faults is None or f in node_faults or t.startswith("client"))
        and (f != WIRE or brokers or t.startswith("client"))
    ]
    if not pairs:
        raise GregorError(
            f"no nemesis target in {list(targets)} fits faults {faults}; "
            "client targets need partition or pause (kill-client needs client targets, "
            "lone-leader leader targets)"
        )
    faults = [f for f in faults if any(f == g for g, _t in pairs)]
    while True:
        fault = rng.choice(faults)
        choices = [t for f, t in pairs if f == fault]
        if not choices:  # e.g. kill with only client targets: pick another fault
            continue
        target = rng.choice(choices)
        drawn = partition_shape(target, rng) if fault == PARTITION else None
        profile = netem.pick_profile(rng, profiles) if fault == NETEM else None
        rule = rng.choice(list(wire_rules)) if fault == WIRE else None
        quiet = round(interval_s * rng.uniform(0.5, 1.5), 3)
        hold = round(interval_s * rng.uniform(0.5, 1.5), 3)
        yield Step(
            fault,
            target,
            quiet_s=quiet,
            hold_s=hold if hold_s is None else float(hold_s),
            shape=(shape or drawn) if fault == PARTITION else None,
            profile=profile,
            rule=rule,
        )
