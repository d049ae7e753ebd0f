"""Partitions on the real lab: the packets that should vanish do, only those,
only in the direction the grudge says, and all flow again after the heal."""

import random

import pytest

from nemesis.faults import Nemesis
from nemesis.ledger import Ledger
from nemesis.schedule import Step

from nemesis_lab_helpers import ClientInfo, ListContext, all_pairs, tcp_connects, udp_reachability

pytestmark = pytest.mark.lab


@pytest.fixture
def nemesis(lab, tmp_path):
    ctx = ListContext(lab)
    nem = Nemesis(ctx, lab.admin(timeout=5), Ledger(tmp_path / "faults.json"), random.Random(11))
    yield ctx, nem
    lab.heal_all()


def expected_pairs(lab, grudge: dict) -> set[tuple[str, str]]:
    return {(a, b) for a, b in all_pairs(lab) if a not in grudge.get(b, [])}


def test_isolated_node_refuses_tcp_both_ways_and_the_rest_still_connect(lab, nemesis):
    ctx, nem = nemesis
    entry = nem.start(Step("partition", "node:n2", 1, 1, shape="isolate"))
    assert ctx.events[-1]["value"]["isolated"] == [["n2"], ["n1", "n3"]]
    for a in lab.nodes:
        for b in lab.nodes:
            if a is not b:
                cut = "n2" in (a.name, b.name)
                assert tcp_connects(a.exec_prefix(), b.ip) is not cut, (a.name, b.name)
    nem.stop(entry)
    assert [e["f"] for e in ctx.events] == ["start-partition"] * 2 + ["stop-partition"] * 2
    assert all(tcp_connects(a.exec_prefix(), b.ip) for a in lab.nodes for b in lab.nodes if a is not b)


@pytest.mark.parametrize("shape,target", [("one-way-in", "node:n1"), ("one-way-out", "node:n3"),
                                          ("ring", "all"), ("bridge", "all"), ("halves", "all"),
                                          ("majority-minority", "minority")])
def test_every_shape_drops_exactly_the_directions_its_grudge_names(lab, nemesis, shape, target):
    ctx, nem = nemesis
    entry = nem.start(Step("partition", target, 1, 1, shape=shape))
    value = ctx.events[-1]["value"]
    assert value["shape"] == ("one-way" if shape.startswith("one-way") else shape)
    want = expected_pairs(lab, value["grudge"])
    assert want != all_pairs(lab)            # something is cut
    seen = udp_reachability(lab)
    assert seen == want
    if shape == "one-way-in":                # n1 hears nobody but is heard
        assert ("n2", "n1") not in seen and ("n1", "n2") in seen
    if shape == "one-way-out":               # nobody hears n3, n3 hears all
        assert ("n3", "n1") not in seen and ("n1", "n3") in seen
    nem.stop(entry)
    assert udp_reachability(lab) == all_pairs(lab)


def test_client_namespace_is_cut_from_every_node_and_healed(lab, nemesis):
    ctx, nem = nemesis
    ns = lab.client_namespace("c1")
    try:
        ctx._clients = [ClientInfo(process=0, pid=1, role="producer", netns=ns.namespace)]
        assert all(tcp_connects(ns.exec_prefix(), n.ip) for n in lab.nodes)
        entry = nem.start(Step("partition", "client", 1, 1, shape="client"))
        assert ctx.events[-1]["value"]["client_ips"] == [ns.ip]
        assert not any(tcp_connects(ns.exec_prefix(), n.ip) for n in lab.nodes)
        # nodes still reach each other
        assert tcp_connects(lab.nodes[0].exec_prefix(), lab.nodes[1].ip)
        nem.stop(entry)
        assert all(tcp_connects(ns.exec_prefix(), n.ip) for n in lab.nodes)
    finally:
        lab.remove_client_namespace("c1")
