"""Who a fault hits, found from the cluster at the moment of the fault.

The interesting nodes are roles, not names: the leader of a key's
partition, the active controller, the coordinator of a transactional.id or
of a consumer group. They move after every fault, so they are asked of the
cluster (the lab's `roles()`) just before each fault, never guessed from a
node name. A role the system does not have is skipped, never guessed.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from ground.errors import GregorError
from ground.protocols import RoleUnavailable

# Target kinds a schedule can name; "leader:K", "node:n2", "txn:ID" and
# "group:G" name one precise instance.
KINDS = ("one", "leader", "controller", "coordinator", "minority", "majority", "all", "client")
PREFIXED = ("leader", "node", "txn", "group", "client")
# client:ROLE:busy: a client working on records it polled, for this long at least
BUSY_MIN_S, BUSY_WAIT_S = 0.1, 5.0
# client:ROLE:window: a copier between its two commits (workloads/eos.py)
STATES = ("busy", "window")


class TargetUnavailable(Exception):
    """The role does not exist right now (no transactional.id yet, no leader
    during an election, no client with a namespace); the fault is skipped."""


@dataclass(frozen=True)
class Target:
    """The resolved victims: node names and/or client processes."""

    role: str
    nodes: tuple[str, ...] = ()
    clients: tuple = field(default=())  # ClientInfo of run's context

    def value(self) -> dict:
        out: dict = {"role": self.role}
        if self.nodes:
            out["nodes"] = list(self.nodes)
        if self.clients:
            out["clients"] = [c.process for c in self.clients]
        return out


def parse_target(text: str) -> str:
    """Checks one target name; returns it stripped, else a GregorError."""
    spec = text.strip()
    kind, sep, arg = spec.partition(":")
    if kind in KINDS and not sep:
        return spec
    if kind in PREFIXED and sep and arg:
        if kind == "client" and ":" in arg and arg.split(":", 1)[1] not in STATES:
            raise GregorError(
                f"target {spec!r}: the states after 'client:ROLE:' are {' and '.join(STATES)}, "
                "e.g. client:member:busy or client:copier:window"
            )
        if kind == "leader" and not arg.lstrip("-").isdigit():
            raise GregorError(f"target {spec!r}: the key after 'leader:' must be an integer, e.g. leader:3")
        return spec
    raise GregorError(
        f"unknown nemesis target {spec!r}; use {', '.join(KINDS)}, "
        "or leader:KEY, node:NAME, txn:TRANSACTIONAL_ID, group:GROUP_ID"
    )


def minority_size(n: int) -> int:
    """The largest group that is still a minority (at least one node)."""
    return max(1, (n - 1) // 2)


def majority_size(n: int) -> int:
    return n // 2 + 1


class TargetResolver:
    """Turns a target name into nodes, asking the cluster for roles.

    `ctx` gives the lab (ctx.lab, whose roles() answers who does what), the
    key map (ctx.test["keys"]), the live clients and the transactional/group ids.
    """

    def __init__(self, lab, ctx, rng: random.Random):
        self.lab = lab
        self.ctx = ctx
        self.rng = rng

    def node_names(self) -> list[str]:
        return [n.name for n in self.lab.nodes]

    def resolve(self, spec: str, need_place: bool = False) -> Target:
        """need_place: only clients with a place of their own (a partition
        cuts a client off by its place's network)."""
        kind, _, arg = spec.partition(":")
        names = self.node_names()
        if kind == "one":
            return Target("one", (self.rng.choice(names),))
        if kind == "node":
            if arg not in names:
                raise GregorError(f"target {spec!r}: no node {arg!r} in lab (nodes: {', '.join(names)})")
            return Target(spec, (arg,))
        if kind == "minority":
            return Target("minority", tuple(sorted(self.rng.sample(names, minority_size(len(names))))))
        if kind == "majority":
            return Target("majority", tuple(sorted(self.rng.sample(names, majority_size(len(names))))))
        if kind == "all":
            return Target("all", tuple(names))
        if kind == "leader":
            return self._leader(int(arg) if arg else None)
        if kind == "controller":
            return Target("controller", (self._role(lambda roles: roles.controller()),))
        if kind == "coordinator":
            return self._coordinator()
        if kind == "txn":
            return self._txn_coordinator(arg)
        if kind == "group":
            return self._group_coordinator(arg)
        if kind == "client":
            return self._client(arg or None, need_place)
        raise GregorError(f"unknown nemesis target {spec!r}")

    # --- roles ---------------------------------------------------------------

    def _keys(self) -> dict:
        test = getattr(self.ctx, "test", None) or {}
        return {str(k): v for k, v in (test.get("keys") or {}).items()}

    def _leader(self, key: int | None) -> Target:
        keys = self._keys()
        if not keys:
            raise TargetUnavailable("no keys in test.json, so no partition leader to target")
        if key is None:
            key = int(self.rng.choice(sorted(keys, key=int)))
        if str(key) not in keys:
            raise GregorError(
                f"target leader:{key}: key {key} is not in the run's key map (keys: {', '.join(sorted(keys, key=int))})"
            )
        topic, partition = keys[str(key)]
        return Target(f"leader:{key}", (self._role(lambda roles: roles.leader(topic, int(partition))),))

    def _coordinator(self) -> Target:
        choices = [("txn", t) for t in self._txn_ids()] + [("group", g) for g in self._group_ids()]
        if not choices:
            raise TargetUnavailable("no transactional.id or consumer group in this run, so no coordinator")
        kind, ident = self.rng.choice(choices)
        if kind == "txn":
            return self._txn_coordinator(ident)
        return self._group_coordinator(ident)

    def _txn_coordinator(self, txn_id: str) -> Target:
        return Target(f"txn-coordinator:{txn_id}", (self._role(lambda roles: roles.txn_coordinator(txn_id)),))

    def _group_coordinator(self, group: str) -> Target:
        return Target(f"group-coordinator:{group}", (self._role(lambda roles: roles.group_coordinator(group)),))

    def wait_for(self, spec: str) -> None:
        """Before a step's invoke: for `client:ROLE:busy` or `:window`, waits
        (up to BUSY_WAIT_S) until such a client exists, so the op itself stays
        short (the nemesis is one process of the history, and the workloads'
        conductors record as it too)."""
        kind, _, arg = spec.strip().partition(":")
        if kind != "client" or arg.partition(":")[2] not in STATES:
            return
        deadline = time.monotonic() + BUSY_WAIT_S
        while not self._matching_clients(arg) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _matching_clients(self, arg: str, need_place: bool = False) -> list:
        """`client:ROLE:busy` takes only a client that has worked on records it
        polled for at least BUSY_MIN_S: a kill then lands inside the window an
        auto commit can leave unprocessed. `client:ROLE:window` takes only a
        copier inside its window, between its two commits."""
        role, _, state = arg.partition(":")
        return [
            c
            for c in self._clients()
            if (not role or c.role == role)
            and (c.place or not need_place)
            and (state != "busy" or (c.busy_s or 0) >= BUSY_MIN_S)
            and (state != "window" or c.window_s is not None)
        ]

    def _client(self, arg: str | None, need_place: bool = False) -> Target:
        """`client`, `client:ROLE` or `client:ROLE:busy` (arg: what follows `client:`)."""
        clients = self._matching_clients(arg or "", need_place)
        if not clients:
            role, _, state = (arg or "").partition(":")
            wanted = f" with role {role!r}" if role else ""
            wanted += f" busy for {BUSY_MIN_S:g} s (waited up to {BUSY_WAIT_S:g} s)" if state == "busy" else ""
            wanted += f" inside its window (waited up to {BUSY_WAIT_S:g} s)" if state == "window" else ""
            wanted += " and a place of its own" if need_place else ""
            raise TargetUnavailable(f"no live client process{wanted} to target")
        client = self.rng.choice(sorted(clients, key=lambda c: c.process))
        return Target(f"client:{client.role}", (), (client,))

    # --- helpers -------------------------------------------------------------

    def _role(self, ask) -> str:
        """The node a role names right now (TargetUnavailable if none does)."""
        try:
            return ask(self.lab.roles())
        except RoleUnavailable as why:
            raise TargetUnavailable(str(why)) from None

    def _clients(self) -> list:
        clients = getattr(self.ctx, "clients", None)
        return list(clients()) if clients else []

    def _txn_ids(self) -> list[str]:
        ids = set(getattr(self.ctx, "txn_ids", lambda: [])() or [])
        ids |= {c.txn_id for c in self._clients() if c.txn_id}
        return sorted(ids)

    def _group_ids(self) -> list[str]:
        ids = set(getattr(self.ctx, "group_ids", lambda: [])() or [])
        ids |= {c.group for c in self._clients() if c.group}
        return sorted(ids)
