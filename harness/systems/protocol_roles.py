"""What every Kafka-compatible system answers the same way: roles and health.

Roles and health come from what the brokers say over the Kafka protocol
(Metadata, FindCoordinator), asked of each broker on its own; a broker id
is mapped to a node by the address the broker advertises, never by name.
A system adds what only it has (Kafka's KRaft controller) on top.
"""

from __future__ import annotations

from typing import Callable

from ground.errors import GregorError
from ground.protocols import RoleUnavailable
from harness.systems import wire


class ProtocolRoles:
    """Partition leaders and coordinators, from any broker that answers."""

    def __init__(self, admin, node_of: Callable[[int], str]):
        self.admin = admin
        self.node_of = node_of

    def _node(self, broker_id, what: str) -> str:
        if broker_id is None or int(broker_id) < 0:
            raise RoleUnavailable(f"the cluster reports no {what} right now")
        return self.node_of(int(broker_id))

    def leader(self, topic: str, partition: int) -> str:
        return self._node(self.admin.leader(topic, int(partition)), f"leader of {topic}-{partition}")

    def controller(self) -> str:
        raise RoleUnavailable("this system has no controller role")

    def txn_coordinator(self, transactional_id: str) -> str:
        return self._node(
            self.admin.txn_coordinator(transactional_id), f"transaction coordinator of {transactional_id!r}"
        )

    def group_coordinator(self, group: str) -> str:
        return self._node(self.admin.group_coordinator(group), f"group coordinator of {group!r}")


def node_by_address(nodes, port: int) -> Callable[[int], str]:
    """broker id -> node name, from the brokers' own Metadata answers
    (the host they advertise is the node's address).

    Every answering broker is asked: when they place one broker id on
    different nodes (each Tansu broker calls itself 111), the id names no
    single node, and the role it holds is unavailable rather than guessed."""
    by_address = {node.address: node.name for node in nodes}

    def node_of(broker_id: int) -> str:
        placed: dict[str, list[str]] = {}
        for node in nodes:
            try:
                brokers = wire.cluster_metadata(node.address, port, [], timeout=3)["brokers"]
            except (OSError, GregorError):
                continue
            if broker_id in brokers:
                host = brokers[broker_id][0]
                if host not in by_address:
                    raise GregorError(f"broker {broker_id} advertises {host}, which is no node of this lab")
                placed.setdefault(by_address[host], []).append(node.name)
        if len(placed) > 1:
            views = "; ".join(f"{', '.join(askers)} say {where}" for where, askers in sorted(placed.items()))
            raise RoleUnavailable(f"broker id {broker_id} names no single node ({views})")
        if placed:
            return next(iter(placed))
        raise RoleUnavailable(f"no broker answers for broker id {broker_id}")

    return node_of


def unhealthy(nodes, port: int, topics: list[str], replicated: bool = True) -> list[str]:
    """What keeps `topics` from being healthy in the view of every broker:
    each must know every partition with a leader (and, where the system
    replicates, a full ISR), and all must agree on the leader."""
    return unhealthy_at([(node.name, node.address, port) for node in nodes], topics, replicated)


def unhealthy_at(
    endpoints: list[tuple[str, str, int]], topics: list[str], replicated: bool = True, security: dict | None = None
) -> list[str]:
    """unhealthy() for brokers named by (name, host, port): several brokers may
    share a node (kfake), or be no node of ours (an external cluster)."""
    bad: list[str] = []
    leaders: dict[tuple[str, int], set[int]] = {}
    for name, host, port in endpoints:
        try:
            view = wire.metadata(host, port, topics, timeout=3, security=security)
        except (OSError, GregorError) as error:
            return [f"{name} does not answer: {error}"]
        for topic in topics:
            found = view.get(topic)
            if found is None or found["error"] or not found["partitions"]:
                bad.append(f"{name} does not know {topic} yet")
                continue
            for pid, part in found["partitions"].items():
                leaders.setdefault((topic, pid), set()).add(part["leader"])
                if part["leader"] < 0 or (replicated and sorted(part["isr"]) != sorted(part["replicas"])):
                    bad.append(f"{topic}/{pid} per {name}: leader {part['leader']} isr {part['isr']}")
    bad += [f"{t}/{p}: brokers disagree on the leader {sorted(ids)}" for (t, p), ids in leaders.items() if len(ids) > 1]
    return bad
