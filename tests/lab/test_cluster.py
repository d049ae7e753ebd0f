"""Properties of a real 3-node Kafka lab in network namespaces."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from ground.errors import GregorError
from ground.procfs import proc_state
from harness import netfaults
from harness.backends import netns
from harness.lab import Lab
from harness.nfqueue_netem import emulators
from lab.helpers import LAB_NAME, consume_all, needs_root, produce

pytestmark = [pytest.mark.lab, needs_root]


def test_three_nodes_come_up_with_distinct_addresses_and_a_controller(lab):
    assert [n.name for n in lab.nodes] == ["n1", "n2", "n3"]
    assert len({n.address for n in lab.nodes}) == 3
    assert all(n.state() == "running" for n in lab.nodes)
    assert lab.up_seconds is not None and lab.up_seconds > 0
    admin = lab.admin()
    assert sorted(admin.brokers()) == [1, 2, 3]
    assert admin.controller() in (1, 2, 3)
    for node in lab.nodes:  # each broker advertises its own node address
        assert admin.brokers()[lab.system.broker_id(node.name)] == f"{node.address}:9092"
        home = Path(node.home)
        assert (home / "server.properties").is_file() and (home / "data").is_dir()
        assert Path(node.service.log).stat().st_size > 0


def test_attach_finds_the_same_lab(lab):
    again = Lab.attach(LAB_NAME)
    assert again.bootstrap_servers == lab.bootstrap_servers
    assert [n.pid() for n in again.nodes] == [n.pid() for n in lab.nodes]
    assert again.broker_config["min.insync.replicas"] == "2"
    assert again.broker_config["unclean.leader.election.enable"] == "false"


def test_a_topic_with_three_replicas_keeps_1000_acks_all_records_in_order(lab):
    lab.admin().create_topic("t-order", partitions=1, replication_factor=3)
    lab.wait_healthy(["t-order"], timeout=30)
    values = [f"v{i}" for i in range(1000)]
    assert produce(lab.bootstrap_servers, "t-order", values) == values
    assert consume_all(lab.bootstrap_servers, "t-order", 1000) == values
    assert sorted(lab.admin().isr("t-order", 0)) == [1, 2, 3]


def test_pause_stops_the_jvm_and_resume_brings_it_back(lab):
    node = lab.node("n3")
    node.pause()
    try:
        assert node.state() == "paused"
        assert proc_state(node.pid()) == "T"
    finally:
        node.resume()
    assert node.state() == "running"
    assert proc_state(node.pid()) in ("S", "R")


def test_after_sigkill_of_a_leader_the_cluster_serves_and_the_broker_rejoins(lab):
    admin = lab.admin()
    admin.create_topic("t-kill", partitions=1, replication_factor=3)
    lab.wait_healthy(["t-kill"], timeout=30)
    victim = lab.node_for_broker(admin.leader("t-kill", 0))
    victim.kill()
    assert victim.state() == "dead" and victim.pid() is None
    values = [f"k{i}" for i in range(200)]
    assert produce(lab.bootstrap_servers, "t-kill", values, timeout=60) == values
    assert consume_all(lab.bootstrap_servers, "t-kill", 200) == values
    assert lab.roles().leader("t-kill", 0) != victim.name
    victim.start()
    lab.wait_healthy(["t-kill"], timeout=60)
    assert sorted(admin.isr("t-kill", 0)) == [1, 2, 3]


def _connect_cmd(ip: str, port: int = 9092) -> list[str]:
    return [
        "python3",
        "-c",
        "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)",
        ip,
        str(port),
    ]


def _ping(node, ip) -> bool:
    """Whether a TCP connection from `node` to the broker port at `ip` succeeds."""
    return node.exec(_connect_cmd(ip), check=False).returncode == 0


def test_drop_to_cuts_one_way_and_heal_restores(lab):
    n1, n2 = lab.node("n1"), lab.node("n2")
    assert _ping(n1, n2.address)
    n1.drop_to([n2.address])
    try:
        assert not _ping(n1, n2.address)  # n1 cannot send to n2
        assert "GREGOR-OUT" in n1.exec(["iptables", "-S", "GREGOR-OUT"]).stdout
    finally:
        n1.heal_network()
    assert _ping(n1, n2.address)


def test_drop_from_blocks_replies_and_heal_restores(lab):
    n1, n3 = lab.node("n1"), lab.node("n3")
    n1.drop_from(n3.address)
    try:
        assert not _ping(n1, n3.address)  # replies from n3 never arrive
        assert _ping(n1, lab.node("n2").address)  # other links stay up
    finally:
        n1.heal_network()
    assert _ping(n1, n3.address)


def test_netem_is_applied_and_cleared(lab):
    node = lab.node("n2")
    if netns.netem_available():
        node.netem("delay 50ms")
        assert "netem" in node.exec(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    else:  # emulated: an NFQUEUE rule and one emulator process serving this namespace
        assert node.netem("delay 50ms") == netfaults.NETEM_EMULATED
        assert "NFQUEUE" in node.exec(["iptables", "-S", "GREGOR-NETEM"]).stdout
        assert len(emulators(node.netem_tag())) == 1
        node.netem("loss 30%")
        assert "statistic" in node.exec(["iptables", "-S", "GREGOR-NETEM"]).stdout
        assert emulators(node.netem_tag()) == []
    node.clear_netem()
    assert "netem" not in node.exec(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    rules = node.exec(["iptables", "-S", "GREGOR-NETEM"], check=False).stdout
    assert "DROP" not in rules and "NFQUEUE" not in rules
    assert emulators(node.netem_tag()) == []


def test_client_place_reaches_brokers_and_is_removed(lab):
    client = lab.client_place("c1")
    try:
        assert client.address not in {n.address for n in lab.nodes}
        assert _ping(lab.place_node(client), lab.node("n1").address)
        assert Lab.attach(LAB_NAME).status()["clients"] == {"c1": client.address}
    finally:
        lab.remove_client_place("c1")
    assert client.handle["netns"] not in netns.namespaces()
    assert lab.client_place("c1", create=False) is None


def test_heal_all_undoes_every_fault(lab):
    n1, n2, n3 = lab.nodes
    n1.drop_to([n2.address])
    n2.pause()
    n3.kill()
    lab.client_place("c2")
    lab.heal_all()
    assert [n.state() for n in lab.nodes] == ["running", "running", "running"]
    assert _ping(n1, n2.address)
    assert not any(ns.endswith("-c2") and ns.startswith(LAB_NAME) for ns in netns.namespaces())
    lab.wait_healthy(timeout=60)


def test_a_taken_port_gives_a_one_line_error(lab):
    node = lab.node("n3")
    node.stop()
    listener = subprocess.Popen(
        [
            *node.exec_prefix(),
            "python3",
            "-c",
            "import socket,time; s=socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            f"s.bind(('{node.address}', 9092)); s.listen(); time.sleep(60)",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while "9092" not in node.exec(["ss", "-Htln"]).stdout and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(GregorError, match="9092.*already in use") as error:
            node.start()
        assert "\n" not in str(error.value)
    finally:
        listener.kill()
        listener.wait()
    node.start()
    lab.wait_healthy(timeout=60)


def test_a_second_lab_up_with_the_same_name_is_refused(lab):
    with pytest.raises(GregorError, match="already up.*local backend, kafka"):
        Lab.up(nodes=5, name=LAB_NAME, progress=lambda _m: None)
    assert all(n.state() == "running" for n in lab.nodes)  # the running lab is untouched


def test_status_names_controller_and_leaders(lab):
    status = lab.status()
    assert status["controller"] in ("n1", "n2", "n3")
    assert [n["state"] for n in status["nodes"]] == ["running"] * 3
    health = status["leaders"]["gregor-health"]
    assert len(health) == 3 and all(p["leader_node"] in ("n1", "n2", "n3") for p in health.values())
    assert Path(status["nodes"][0]["log"]).is_file()


def test_coordinators_are_found_not_guessed(lab):
    admin = lab.admin(timeout=30)
    assert admin.group_coordinator("g-1") in (1, 2, 3)
    assert admin.txn_coordinator("txn-1") in (1, 2, 3)
    # The controller is the Raft leader all brokers report, whichever broker is asked.
    from harness.systems import wire

    answers = {wire.active_controller(n.address, 9092) for n in lab.nodes}
    assert answers == {admin.controller()}
    assert lab.roles().controller() == lab.system.node_of(admin.controller())
