"""Grudge shapes: who can hear whom, checked on plain data."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.errors import GregorError
from nemesis import partitions as p

node_lists = st.integers(min_value=3, max_value=9).map(lambda n: [f"n{i}" for i in range(1, n + 1)])
seeds = st.integers(min_value=0, max_value=2**32)


def reach(part, a, b):
    return p.can_reach(part, a, b)


@given(node_lists, seeds)
def test_halves_cut_every_link_across_and_none_inside(nodes, seed):
    part = p.random_halves(nodes, random.Random(seed))
    small, big = part.components
    assert sorted(small + big) == sorted(nodes)
    assert len(big) - len(small) in (0, 1)
    for a in nodes:
        for b in nodes:
            same = (a in small) == (b in small)
            assert reach(part, a, b) == same


@given(node_lists)
def test_isolate_leaves_one_node_alone(nodes):
    part = p.isolate(nodes, nodes[1])
    assert part.value()["isolated"] == [[nodes[1]], sorted(n for n in nodes if n != nodes[1])]
    for other in nodes:
        if other != nodes[1]:
            assert not reach(part, other, nodes[1]) and not reach(part, nodes[1], other)


def test_majority_minority_refuses_a_non_minority():
    nodes = ["n1", "n2", "n3"]
    assert p.majority_minority(nodes, ["n2"]).components == (("n2",), ("n1", "n3"))
    with pytest.raises(GregorError, match="minority"):
        p.majority_minority(nodes, ["n1", "n2"])


@given(node_lists, seeds)
def test_bridge_node_hears_everyone_and_halves_do_not_hear_each_other(nodes, seed):
    part = p.bridge(nodes, random.Random(seed))
    bridges = [n for n in nodes if all(reach(part, n, o) and reach(part, o, n) for o in nodes)]
    assert len(bridges) == 1
    rest = [n for n in nodes if n != bridges[0]]
    # the rest splits into two sides with no link across
    side = {rest[0]} | {o for o in rest if reach(part, rest[0], o)}
    other = set(rest) - side
    assert other and all(not reach(part, a, b) for a in side for b in other)
    assert len(side) + 1 > len(nodes) / 2 or len(other) + 1 > len(nodes) / 2


@given(node_lists, seeds)
def test_ring_gives_each_node_a_distinct_majority_view(nodes, seed):
    part = p.majorities_ring(nodes, random.Random(seed))
    views = []
    for n in nodes:
        heard = frozenset(o for o in nodes if reach(part, o, n))
        assert n in heard and len(heard) > len(nodes) / 2
        views.append(heard)
    assert len(set(views)) == len(nodes)


def test_ring_of_three_is_a_one_way_cycle():
    part = p.majorities_ring(["n1", "n2", "n3"], random.Random(7))
    cut = [(s, t) for t, srcs in part.grudge.items() for s in srcs]
    assert len(cut) == 3
    assert all((t, s) not in cut for s, t in cut)  # never both directions


def test_one_way_cuts_only_the_named_direction():
    part = p.one_way(["n1", "n2", "n3"], ["n1"], ["n2"])
    assert not reach(part, "n1", "n2")
    assert reach(part, "n2", "n1") and reach(part, "n1", "n3") and reach(part, "n3", "n2")
    assert part.nodes() == ["n2"]
    with pytest.raises(GregorError, match="disjoint"):
        p.one_way(["n1", "n2"], ["n1"], ["n1"])


def test_shapes_need_enough_nodes():
    with pytest.raises(GregorError, match="at least 3 nodes"):
        p.bridge(["n1", "n2"], random.Random(0))


def test_value_lists_the_grudge_for_the_history():
    part = p.isolate(["n1", "n2", "n3"], "n3")
    assert part.value() == {
        "shape": "isolate",
        "isolated": [["n3"], ["n1", "n2"]],
        "grudge": {"n1": ["n3"], "n2": ["n3"], "n3": ["n1", "n2"]},
    }


class _Cut:
    def __init__(self, log):
        self.log = log

    def drop_to(self, addresses):
        self.log.append(("drop_to", list(addresses)))

    def drop_from(self, addresses):
        self.log.append(("drop_from", list(addresses)))


class _Lab:
    def __init__(self):
        self.log = []

    def place_node(self, place):
        return _Cut(self.log)


def test_client_cuts_drop_the_direction_their_shape_names():
    addresses = ["10.0.0.1", "10.0.0.2"]
    for shape, want in (
        ("client", [("drop_to", addresses), ("drop_from", addresses)]),
        ("client-one-way", [("drop_to", addresses)]),
        ("client-deaf", [("drop_from", addresses)]),
    ):
        lab = _Lab()
        p.cut_client(lab, "c1", addresses, p.CLIENT_CUTS[shape])
        assert lab.log == want, shape
