"""`gregor run --workload queue --nemesis partition,pause,kill`: the faults
happen, each is healed, and the cluster ends healthy with nothing left."""

from collections import Counter

import pytest
from nemesis_lab_helpers import gregor_run

from ground.faults import kind
from ground.procfs import proc_state
from harness import netfaults
from nemesis.ledger import Ledger

pytestmark = pytest.mark.lab


def applied(history, f):
    """Completions of nemesis op f that did something (not skipped/failed)."""
    return [
        e
        for e in history
        if e.get("process") == "nemesis"
        and e["type"] == "info"
        and e["f"] == f
        and "skipped" not in e["value"]
        and "failed" not in e["value"]
    ]


@pytest.mark.first_backend_only  # CI time: docker's faults and heals have tests of their own
def test_sixty_second_queue_run_with_faults_ends_healthy_with_nothing_left(lab, tmp_path):
    run_dir, history, test = gregor_run(
        lab,
        tmp_path,
        "--workload",
        "queue",
        "--nemesis",
        "partition,pause,kill",
        "--nemesis-interval",
        "5",
        "--time-limit",
        "60",
        "--seed",
        "0",
    )

    # every fault type was applied, and each application was healed
    for fault in ("partition", "pause", "kill"):
        starts, stops = applied(history, kind(fault).start), applied(history, kind(fault).heal)
        assert starts, f"no {fault} fault in the run"
        assert len(stops) == len(starts), (fault, len(starts), len(stops))
    assert test["nemesis"]["faults"] == ["partition", "pause", "kill"]

    # nothing left behind: rules, netem, paused or dead brokers, paused clients, ledger
    for node in lab.nodes:
        assert netfaults.rules(node) == [], node.name
        qdisc = node.exec(["tc", "qdisc", "show", "dev", node.device]).stdout
        assert "netem" not in qdisc and "tbf" not in qdisc, (node.name, qdisc)
        assert node.state() == "running", node.name
    paused_clients = [pid for e in applied(history, "pause") for pid in e["value"].get("client_pids", [])]
    assert all(proc_state(pid) not in ("T", "t") for pid in paused_clients)
    assert test["backend"] == lab.backend.name and test["setup"]["system"] == "kafka"
    assert Ledger.for_lab(lab.name).entries() == []

    # healthy: every partition of the run's topics has a leader and 3 in-sync
    # replicas (a broker restarted by the last heal may need a moment to catch up)
    topics = sorted({topic for topic, _ in test["keys"].values()})
    lab.wait_healthy(topics=topics, timeout=60)
    admin = lab.admin(timeout=10)
    isr_sizes = Counter(len(p["isr"]) for t in topics for p in admin.partitions(t).values())
    assert isr_sizes == Counter({3: sum(isr_sizes.values())})
