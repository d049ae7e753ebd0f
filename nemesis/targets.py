"""Who a fault hits, found from the cluster at the moment of the fault.

Kafka's interesting nodes are roles, not names: the leader of a key's
partition, the active controller, the coordinator of a transactional.id or
of a consumer group. They move after every fault, so they are looked up with
the admin client just before each fault, never guessed from a node name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from harness.errors import GregorError

# Target kinds a schedule can name; "leader:K", "node:n2", "txn:ID" and
# "group:G" name one precise instance.
KINDS = ("one", "leader", "controller", "coordinator", "minority", "majority", "all", "client")
PREFIXED = ("leader", "node", "txn", "group", "client")


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
            out["clients"] = [{"process": c.process, "pid": c.pid, "role": c.role}
                              for c in self.clients]
        return out


def parse_target(text: str) -> str:
    """Checks one target name; returns it stripped, else a GregorError."""
    spec = text.strip()
    kind, sep, arg = spec.partition(":")
    if kind in KINDS and not sep:
        return spec
    if kind in PREFIXED and sep and arg:
        if kind == "leader" and not arg.lstrip("-").isdigit():
            raise GregorError(f"target {spec!r}: the key after 'leader:' must be an integer, e.g. leader:3")
        return spec
    raise GregorError(
        f"unknown nemesis target {spec!r}; use {', '.join(KINDS)}, "
        "or leader:KEY, node:NAME, txn:TRANSACTIONAL_ID, group:GROUP_ID")


def minority_size(n: int) -> int:
    """The largest group that is still a minority (at least one node)."""
    return max(1, (n - 1) // 2)


def majority_size(n: int) -> int:
    return n // 2 + 1


class TargetResolver:
    """Turns a target name into nodes, asking the cluster for roles.

    `admin` is a harness.kafka_admin.KafkaAdmin; `ctx` gives the key map
    (ctx.test["keys"]), the live clients and the transactional/group ids.
    """

    def __init__(self, lab, admin, ctx, rng: random.Random):
        self.lab = lab
        self.admin = admin
        self.ctx = ctx
        self.rng = rng

    def node_names(self) -> list[str]:
        return [n.name for n in self.lab.nodes]

    def resolve(self, spec: str, need_netns: bool = False) -> Target:
        """need_netns: only clients with a namespace of their own (a
        partition cuts a client by its namespace's address)."""
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
            return Target("controller", (self._node_of(self.admin.controller(), "controller"),))
        if kind == "coordinator":
            return self._coordinator()
        if kind == "txn":
            return self._txn_coordinator(arg)
        if kind == "group":
            return self._group_coordinator(arg)
        if kind == "client":
            return self._client(arg or None, need_netns)
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
            raise GregorError(f"target leader:{key}: key {key} is not in the run's key map "
                              f"(keys: {', '.join(sorted(keys, key=int))})")
        topic, partition = keys[str(key)]
        broker = self.admin.leader(topic, int(partition))
        node = self._node_of(broker, f"leader of key {key} ({topic}-{partition})")
        return Target(f"leader:{key}", (node,))

    def _coordinator(self) -> Target:
        choices = [("txn", t) for t in self._txn_ids()] + [("group", g) for g in self._group_ids()]
        if not choices:
            raise TargetUnavailable("no transactional.id or consumer group in this run, so no coordinator")
        kind, ident = self.rng.choice(choices)
        if kind == "txn":
            return self._txn_coordinator(ident)
        return self._group_coordinator(ident)

    def _txn_coordinator(self, txn_id: str) -> Target:
        broker = self.admin.txn_coordinator(txn_id)
        return Target(f"txn-coordinator:{txn_id}",
                      (self._node_of(broker, f"transaction coordinator of {txn_id!r}"),))

    def _group_coordinator(self, group: str) -> Target:
        broker = self.admin.group_coordinator(group)
        return Target(f"group-coordinator:{group}",
                      (self._node_of(broker, f"group coordinator of {group!r}"),))

    def _client(self, role: str | None, need_netns: bool = False) -> Target:
        clients = [c for c in self._clients()
                   if (role is None or c.role == role) and (c.netns or not need_netns)]
        if not clients:
            wanted = f" with role {role!r}" if role else ""
            wanted += " and a namespace of its own" if need_netns else ""
            raise TargetUnavailable(f"no live client process{wanted} to target")
        client = self.rng.choice(sorted(clients, key=lambda c: c.process))
        return Target(f"client:{client.role}", (), (client,))

    # --- helpers -------------------------------------------------------------

    def _node_of(self, broker_id, what: str) -> str:
        if broker_id is None or int(broker_id) < 0:
            raise TargetUnavailable(f"the cluster reports no {what} right now")
        return self.lab.node_for_broker(int(broker_id)).name

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
