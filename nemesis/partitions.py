"""Network partitions as grudges: who drops whose packets.

A grudge maps a node to the nodes whose packets it drops on arrival. It is
plain data, so every shape can be built and checked without a cluster, and
one function turns any grudge into iptables rules on the real nodes. A
client is cut off by rules in its own place (its network namespace).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ground.errors import GregorError
from ground.faults import PARTITION
from nemesis.values import fault_value

Grudge = dict[str, frozenset[str]]

SHAPES = ("halves", "majority-minority", "isolate", "bridge", "ring", "one-way")


@dataclass(frozen=True)
class Partition:
    """A shape with its grudge and the history value that describes it."""

    shape: str
    grudge: Grudge
    components: tuple[tuple[str, ...], ...] | None = None

    def value(self) -> dict:
        """What the history says was done: components where the cut is
        complete, else the grudge itself (who drops packets from whom)."""
        out: dict = {"shape": self.shape}
        if self.components is not None:
            out["isolated"] = [list(c) for c in self.components]
        out["grudge"] = {n: sorted(src) for n, src in sorted(self.grudge.items()) if src}
        return out

    def nodes(self) -> list[str]:
        """Every node that carries a rule (those whose chains need healing)."""
        return sorted(n for n, src in self.grudge.items() if src)


def complete_grudge(components) -> Grudge:
    """Each node drops packets from every node outside its own component."""
    everyone = {n for c in components for n in c}
    grudge: Grudge = {}
    for component in components:
        outside = frozenset(everyone - set(component))
        for node in component:
            grudge[node] = outside
    return grudge


def _complete(shape: str, components) -> Partition:
    components = tuple(tuple(sorted(c)) for c in components)
    return Partition(shape, complete_grudge(components), components)


def random_halves(nodes, rng: random.Random) -> Partition:
    """Shuffled nodes cut into two halves (the smaller half first)."""
    _need(nodes, 2)
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return _complete("halves", [shuffled[:cut], shuffled[cut:]])


def majority_minority(nodes, minority) -> Partition:
    """The given minority cut off from the rest, which is a majority."""
    minority = list(minority)
    rest = [n for n in nodes if n not in minority]
    if not minority or len(minority) >= len(rest):
        raise GregorError(f"a minority must be fewer than half of {len(nodes)} nodes, got {minority}")
    return _complete("majority-minority", [minority, rest])


def isolate(nodes, node) -> Partition:
    """One node alone, the others still together."""
    if node not in nodes:
        raise GregorError(f"cannot isolate {node}: not one of {list(nodes)}")
    return _complete("isolate", [[node], [n for n in nodes if n != node]])


def bridge(nodes, rng: random.Random) -> Partition:
    """Two halves that cannot see each other but both see one bridge node.

    The bridge forms a majority with either half, so both halves can elect
    through it while they cannot hear each other.
    """
    _need(nodes, 3)
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    middle = shuffled[0]
    rest = shuffled[1:]
    cut = len(rest) // 2
    left, right = set(rest[:cut]), set(rest[cut:])
    grudge: Grudge = {middle: frozenset()}
    for node in left:
        grudge[node] = frozenset(right)
    for node in right:
        grudge[node] = frozenset(left)
    return Partition("bridge", grudge)


def majorities_ring(nodes, rng: random.Random) -> Partition:
    """Each node sees a majority: itself and the next nodes of a shuffled ring.

    No two nodes see the same majority, so every node believes it is in the
    majority while the views disagree; with three nodes each one hears only
    its successor (a one-way cycle).
    """
    _need(nodes, 3)
    ring = list(nodes)
    rng.shuffle(ring)
    size = len(ring) // 2 + 1
    grudge: Grudge = {}
    for i, node in enumerate(ring):
        visible = {ring[(i + k) % len(ring)] for k in range(size)}
        grudge[node] = frozenset(set(ring) - visible)
    return Partition("ring", grudge)


def one_way(nodes, sources, targets) -> Partition:
    """Packets from sources to targets are dropped; the reverse still flows.

    One link (one source, one target), or one node that can talk but not
    listen (targets = the others), or one that listens but is not heard.
    """
    sources, targets = sorted(set(sources)), sorted(set(targets))
    for node in sources + targets:
        if node not in nodes:
            raise GregorError(f"cannot cut {sources}->{targets}: {node} is not one of {list(nodes)}")
    if not sources or not targets or set(sources) & set(targets):
        raise GregorError(f"a one-way cut needs two disjoint, non-empty node sets, got {sources} and {targets}")
    grudge: Grudge = {n: frozenset() for n in nodes}
    for node in targets:
        grudge[node] = frozenset(sources)
    return Partition("one-way", grudge)


def can_reach(partition: Partition, source: str, target: str) -> bool:
    """Whether packets from source arrive at target under this partition."""
    return source not in partition.grudge.get(target, frozenset())


def _need(nodes, count: int) -> None:
    if len(nodes) < count:
        raise GregorError(f"this partition shape needs at least {count} nodes, the lab has {len(nodes)}")


# --- applying to the real lab ----------------------------------------------


def apply_grudge(lab, grudge: Grudge) -> None:
    """Installs DROP rules: each node drops packets from its grudge's nodes."""
    for name, sources in sorted(grudge.items()):
        if sources:
            lab.node(name).drop_from([lab.node(s).address for s in sorted(sources)])


CLIENT_CUTS = {"client": "both", "client-one-way": "client->nodes", "client-deaf": "nodes->client"}


def cut_client(lab, place, addresses, direction: str = "both") -> None:
    """The client's place drops its packets to the brokers' addresses, or
    from them, or both: rules on the client's side, so the same cut works
    whatever the nodes are, also for a cluster Gregor did not start
    (lab.client_addresses()). "both": nothing passes. "client->nodes":
    requests vanish while the client still hears the cluster, the shape of a
    half-broken link. "nodes->client": requests arrive and are acted on, the
    answers vanish: the client cannot know its write was appended (a lost
    acknowledgement)."""
    cut = lab.place_node(place)
    if direction in ("both", "client->nodes"):
        cut.drop_to(addresses)
    if direction in ("both", "nodes->client"):
        cut.drop_from(addresses)


# --- the fault (ground/faults.py: partition) ---------------------------------

NEEDS_PLACE = True  # a client target is cut at its own network place


def start(nemesis, step, target):
    """Cuts nodes from each other in the step's shape, or a client from every node."""
    lab = nemesis.lab
    names = [n.name for n in lab.nodes]
    shape = step.shape or "isolate"
    if shape.startswith("client"):
        client = target.clients[0]
        place = lab.client_place(client.place)
        direction = CLIENT_CUTS[shape]
        entry = nemesis.ledger.add(
            {
                "fault": PARTITION,
                "nodes": [],
                "places": [place.name],
                "clients": [{"process": client.process}],
                "role": target.role,
            }
        )
        addresses = lab.client_addresses()
        cut_client(lab, place, addresses, direction)
        value = fault_value(
            [],
            [client.process],
            role=target.role,
            shape=shape,
            client_address=place.address,
            cut_from=names or addresses,
            direction=direction,
        )
        return entry, value
    part = node_shape(shape, names, target, nemesis.rng)
    entry = nemesis.ledger.add({"fault": PARTITION, "nodes": part.nodes(), "role": target.role})
    apply_grudge(lab, part.grudge)
    return entry, fault_value(part.nodes(), **part.value(), role=target.role)


def node_shape(shape: str, names: list[str], target, rng: random.Random) -> Partition:
    """The partition of the lab's nodes that a node shape draws for a target."""
    if shape == "isolate":
        return isolate(names, target.nodes[0])
    if shape in ("one-way-in", "one-way-out"):
        victim = target.nodes[0]
        others = [n for n in names if n != victim]
        if shape == "one-way-in":  # the victim hears nobody, is heard by all
            return one_way(names, others, [victim])
        return one_way(names, [victim], others)
    if shape == "majority-minority":
        chosen = list(target.nodes)
        minority = chosen if 2 * len(chosen) < len(names) else [n for n in names if n not in chosen]
        return majority_minority(names, minority)
    if shape == "halves":
        return random_halves(names, rng)
    if shape == "bridge":
        return bridge(names, rng)
    if shape == "ring":
        return majorities_ring(names, rng)
    raise ValueError(f"unknown partition shape {shape!r}")


def heal(lab, entry: dict) -> dict:
    """Heals the nodes' links, and the client places' where the cut was a client's."""
    nodes = list(entry.get("nodes", []))
    for name in nodes:
        lab.node(name).heal_network()
    out: dict = {"healed": nodes}
    if entry.get("places"):
        out["healed_places"] = []
        for name in entry["places"]:
            place = lab.client_place(name, create=False)
            if place is not None:  # gone already: nothing left to heal
                lab.place_node(place).heal_network()
                out["healed_places"].append(name)
    return out
