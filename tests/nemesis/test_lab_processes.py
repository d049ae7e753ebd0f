"""Pauses, kills and netem on the real lab, aimed at roles the cluster reports."""

import random
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from nemesis_lab_helpers import ClientInfo, ListContext, udp_counts

from ground.errors import GregorError
from ground.procfs import proc_state
from harness import netfaults
from harness.backends import netns
from nemesis.faults import Nemesis
from nemesis.ledger import Ledger
from nemesis.schedule import Step

pytestmark = pytest.mark.lab

TOPIC = "nem-roles"


@pytest.fixture(scope="module")
def admin(lab):
    admin = lab.admin(timeout=5)
    admin.create_topic(TOPIC, partitions=2, replication_factor=3)
    lab.wait_healthy(topics=[TOPIC], timeout=60)
    return admin


@pytest.fixture
def make(lab, admin, tmp_path):
    """A Nemesis over a recording context (keys 0, 1 -> nem-roles/0, /1)."""

    def build(**kw):
        ctx = ListContext(lab, keys={"0": [TOPIC, 0], "1": [TOPIC, 1]}, **kw)
        return ctx, Nemesis(ctx, Ledger(tmp_path / "faults.json"), random.Random(5))

    yield build
    lab.heal_all()


def wait_for(what, check, timeout=60.0):
    """Polls `check` until it returns something truthy. A metadata request
    may time out while the cluster elects a new leader; that counts as "not
    yet", not as a failure, until the deadline."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except GregorError as error:
            value, last_error = None, error
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


def healthy(lab, topics=(TOPIC,)):
    lab.wait_healthy(topics=list(topics), timeout=90)


def node_proc_state(node, pid: int) -> str:
    """The state letter of a process on the node, read on the node itself."""
    stat = node.exec(["cat", f"/proc/{pid}/stat"]).stdout
    return stat[stat.rindex(")") + 2]


def test_paused_broker_is_in_state_T_and_resumes(lab, make):
    ctx, nem = make()
    node = lab.node("n2")
    pid = node.pid()
    entry = nem.start(Step("pause", "node:n2", 1, 1))
    assert ctx.events[-1]["value"]["paused"] == ["n2"] and ctx.events[-1]["value"]["nodes"] == ["n2"]
    assert node_proc_state(node, pid) == "T" and node.state() == "paused"
    nem.stop(entry)
    assert ctx.events[-1]["f"] == "resume" and ctx.events[-1]["value"]["resumed"] == ["n2"]
    assert node_proc_state(node, pid) in ("R", "S")


def test_paused_client_is_in_state_T_and_resumes(lab, make):
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        ctx, nem = make(clients=[ClientInfo(process=4, pid=sleeper.pid, role="txn", txn_id="t")])
        entry = nem.start(Step("pause", "client", 1, 1))
        assert ctx.events[-1]["value"]["paused_clients"] == [4]
        assert ctx.events[-1]["value"]["clients"] == [4] and ctx.events[-1]["value"]["client_pids"] == [sleeper.pid]
        assert proc_state(sleeper.pid) == "T"
        nem.stop(entry)
        assert ctx.events[-1]["value"]["resumed_clients"] == [4]
        # just after SIGCONT the sleeper may still be runnable before it sleeps again
        assert proc_state(sleeper.pid) in ("R", "S")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_killing_the_leader_of_a_key_kills_that_leader_and_it_rejoins(lab, admin, make):
    ctx, nem = make()
    before = admin.leader(TOPIC, 1)
    assert lab.roles().leader(TOPIC, 1) == lab.node_for_broker(before).name
    entry = nem.start(Step("kill", "leader:1", 1, 1))
    value = ctx.events[-1]["value"]
    assert value["role"] == "leader:1" and value["killed"] == [lab.node_for_broker(before).name]
    assert lab.node_for_broker(before).state() == "dead"
    new = wait_for(
        "a new leader", lambda: (lambda found: found if found not in (-1, before) else None)(admin.leader(TOPIC, 1))
    )
    assert new != before
    nem.stop(entry)
    assert ctx.events[-1]["value"]["started"] == [lab.node_for_broker(before).name]
    healthy(lab)
    assert sorted(admin.isr(TOPIC, 1)) == [1, 2, 3]


@pytest.mark.first_backend_only  # which node a role names is Kafka's answer, not the backend's
def test_killing_the_controller_kills_the_active_controller(lab, admin, make):
    ctx, nem = make()
    before = admin.controller()
    entry = nem.start(Step("kill", "controller", 1, 1))
    assert ctx.events[-1]["value"]["killed"] == [lab.node_for_broker(before).name]
    assert wait_for("a new controller", lambda: (lambda c: c if c != before else None)(admin.controller())) != before
    nem.stop(entry)
    healthy(lab)


@pytest.mark.first_backend_only  # which node a role names is Kafka's answer, not the backend's
def test_coordinator_targets_hit_the_coordinators_the_cluster_reports(lab, admin, make):
    producer = Producer({"bootstrap.servers": lab.bootstrap_servers, "transactional.id": "nem-tx"})
    producer.init_transactions(60)
    consumer = Consumer(
        {"bootstrap.servers": lab.bootstrap_servers, "group.id": "nem-g", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([TOPIC])
        wait_for("a group assignment", lambda: consumer.poll(0.5) or consumer.assignment(), timeout=60)
        txn_before = admin.txn_coordinator("nem-tx")
        ctx, nem = make(txn_ids=["nem-tx"])
        entry = nem.start(Step("pause", "coordinator", 1, 1))
        value = ctx.events[-1]["value"]
        assert value["role"] == "txn-coordinator:nem-tx"
        assert value["paused"] == [lab.node_for_broker(txn_before).name]
        nem.stop(entry)

        group_before = admin.group_coordinator("nem-g")
        ctx, nem = make(group_ids=["nem-g"])
        entry = nem.start(Step("kill", "group:nem-g", 1, 1))
        assert ctx.events[-1]["value"]["killed"] == [lab.node_for_broker(group_before).name]
        nem.stop(entry)
    finally:
        consumer.close()
        producer.flush(5)
    healthy(lab)


def test_netem_loss_drops_the_share_of_packets_it_says(lab, make):
    ctx, nem = make()
    sent = 400
    clean = udp_counts(lab, senders=["n1"], count=sent)
    assert clean[("n1", "n2")] == sent
    entry = nem.start(Step("netem", "node:n1", 1, 1, profile="loss"))
    assert ctx.events[-1]["value"]["netem"] == "loss 20%"
    lossy = udp_counts(lab, senders=["n1"], count=sent)
    for dest in ("n2", "n3"):
        lost = 1 - lossy[("n1", dest)] / sent
        assert 0.10 <= lost <= 0.32, (dest, lost)  # 20% +- 4 standard deviations
    nem.stop(entry)
    assert udp_counts(lab, senders=["n1"], count=sent)[("n1", "n2")] == sent


def test_netem_delay_adds_the_latency_it_says(lab, make):
    """With the netem qdisc or, where the kernel lacks it, its NFQUEUE emulation."""
    from nemesis_lab_helpers import tcp_connect_ms

    ctx, nem = make()
    n1, n2 = lab.node("n1"), lab.node("n2")
    before = tcp_connect_ms(n2, n1.address)
    entry = nem.start(Step("netem", "node:n1", 1, 1, profile="delay"))  # 200 ms +- 50 ms
    qdisc = netns.netem_available()
    assert ctx.events[-1]["value"]["applied_by"] == {"n1": netfaults.NETEM_QDISC if qdisc else netfaults.NETEM_EMULATED}
    during = tcp_connect_ms(n2, n1.address)
    nem.stop(entry)
    after = tcp_connect_ms(n2, n1.address)
    assert 120 <= during - before <= 300
    assert after - before < 50
