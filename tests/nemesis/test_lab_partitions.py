"""Partitions on the real lab: the packets that should vanish do, only those,
only in the direction the grudge says, and all flow again after the heal."""

import random

import pytest
from nemesis_lab_helpers import ClientInfo, ListContext, all_pairs, tcp_connects, udp_reachability

from nemesis.faults import Nemesis
from nemesis.ledger import Ledger
from nemesis.schedule import Step

pytestmark = pytest.mark.lab


@pytest.fixture
def nemesis(lab, tmp_path):
    ctx = ListContext(lab)
    nem = Nemesis(ctx, Ledger(tmp_path / "faults.json"), random.Random(11))
    yield ctx, nem
    lab.heal_all()


def expected_pairs(lab, grudge: dict) -> set[tuple[str, str]]:
    return {(a, b) for a, b in all_pairs(lab) if a not in grudge.get(b, [])}


def test_isolated_node_refuses_tcp_both_ways_and_the_rest_still_connect(lab, nemesis):
    ctx, nem = nemesis
    entry = nem.start(Step("partition", "node:n2", 1, 1, shape="isolate"))
    value = ctx.events[-1]["value"]
    assert value["isolated"] == [["n2"], ["n1", "n3"]] and value["nodes"] == ["n1", "n2", "n3"]
    for a in lab.nodes:
        for b in lab.nodes:
            if a is not b:
                cut = "n2" in (a.name, b.name)
                assert tcp_connects(a, b.address) is not cut, (a.name, b.name)
    nem.stop(entry)
    assert [e["f"] for e in ctx.events] == ["start-partition"] * 2 + ["stop-partition"] * 2
    assert ctx.events[-1]["value"]["nodes"] == ["n1", "n2", "n3"]
    assert all(tcp_connects(a, b.address) for a in lab.nodes for b in lab.nodes if a is not b)


# The one-way shapes run on every backend: a backend could pass packets one way
# that the other way's rules do not name. The others only combine node-to-node
# cuts that the isolate test above shows on every backend (CI time).
EVERY_BACKEND = ("one-way-in", "one-way-out")


@pytest.mark.parametrize(
    "shape,target",
    [
        pytest.param(shape, target, marks=() if shape in EVERY_BACKEND else pytest.mark.first_backend_only)
        for shape, target in (
            ("one-way-in", "node:n1"),
            ("one-way-out", "node:n3"),
            ("ring", "all"),
            ("bridge", "all"),
            ("halves", "all"),
            ("majority-minority", "minority"),
        )
    ],
)
def test_every_shape_drops_exactly_the_directions_its_grudge_names(lab, nemesis, shape, target):
    ctx, nem = nemesis
    entry = nem.start(Step("partition", target, 1, 1, shape=shape))
    value = ctx.events[-1]["value"]
    assert value["shape"] == ("one-way" if shape.startswith("one-way") else shape)
    want = expected_pairs(lab, value["grudge"])
    assert want != all_pairs(lab)  # something is cut
    seen = udp_reachability(lab)
    assert seen == want
    if shape == "one-way-in":  # n1 hears nobody but is heard
        assert ("n2", "n1") not in seen and ("n1", "n2") in seen
    if shape == "one-way-out":  # nobody hears n3, n3 hears all
        assert ("n3", "n1") not in seen and ("n1", "n3") in seen
    nem.stop(entry)
    assert udp_reachability(lab) == all_pairs(lab)


def test_client_place_is_cut_from_every_node_and_healed(lab, nemesis):
    ctx, nem = nemesis
    place = lab.client_place("c1")
    client = lab.place_node(place)
    try:
        ctx._clients = [ClientInfo(process=0, pid=1, role="producer", place="c1")]
        assert all(tcp_connects(client, n.address) for n in lab.nodes)
        entry = nem.start(Step("partition", "client", 1, 1, shape="client"))
        value = ctx.events[-1]["value"]
        assert value["client_address"] == place.address and value["clients"] == [0] and value["nodes"] == []
        assert not any(tcp_connects(client, n.address) for n in lab.nodes)
        # nodes still reach each other
        assert tcp_connects(lab.nodes[0], lab.nodes[1].address)
        nem.stop(entry)
        assert ctx.events[-1]["value"]["healed_places"] == ["c1"]
        assert all(tcp_connects(client, n.address) for n in lab.nodes)
    finally:
        lab.remove_client_place("c1")


def test_a_port_cut_drops_only_that_port_from_those_nodes(lab):
    """lone-leader's cut: the others cannot reach the leader's client port (where
    followers fetch) while its controller port and this host still answer."""
    leader, others = lab.nodes[0], lab.nodes[1:]
    client_port, controller_port = leader.service.ports[:2]
    try:
        leader.drop_from([n.address for n in others], port=client_port)
        assert not any(tcp_connects(n, leader.address, client_port) for n in others)
        assert all(tcp_connects(n, leader.address, controller_port) for n in others)
        assert tcp_connects(others[0], others[1].address, client_port)
        import socket

        socket.create_connection((leader.address, client_port), timeout=3).close()  # clients still reach it
    finally:
        leader.heal_network()
    assert all(tcp_connects(n, leader.address, client_port) for n in others)
