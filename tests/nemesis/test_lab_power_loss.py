"""The power-loss fault on a real lab whose brokers keep their data on powerfs:
after the fault a file written without fsync is shorter or gone, one written
with fsync is intact; the history says which files lost how many bytes; the
heal brings the broker back; a backend that cannot cut power says so in one line."""

import os
import random

import pytest
from backend_params import lab_name
from nemesis_lab_helpers import ListContext

from ground.errors import GregorError
from ground.faults import POWER_LOSS
from harness.lab import Lab
from nemesis.faults import Nemesis
from nemesis.ledger import Ledger
from nemesis.schedule import Step

pytestmark = pytest.mark.lab

NAME = lab_name("pwr")
WRITE = """
import os, sys
path, size, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "sync"
with open(path, "wb") as handle:
    handle.write(b"x" * size)
    handle.flush()
    if sync:
        os.fsync(handle.fileno())
"""


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    Lab.down(NAME, progress=lambda _m: None, backend="local")
    Ledger.for_lab(NAME).clear()  # what an interrupted earlier session left
    found = Lab.up(nodes=3, name=NAME, storage="powerfs", progress=lambda _m: None, backend="local")
    try:
        yield found
    finally:
        Lab.down(NAME, progress=lambda _m: None, backend="local")


def size_on(node, path):
    out = node.exec(["sh", "-c", 'stat -c %s "$1" 2>/dev/null || echo gone', "sh", path], check=False).stdout
    return out.strip()


def test_a_power_cut_keeps_fsynced_files_and_loses_unsynced_ones(lab):
    node = lab.node("n1")
    data = lab.data_dir(node)
    synced, unsynced = f"{data}/gregor-synced", f"{data}/gregor-unsynced"
    node.exec([node.python, "-c", WRITE, synced, "20000", "sync"])
    node.exec([node.python, "-c", WRITE, unsynced, "30000", "nosync"])
    assert size_on(node, unsynced) == "30000"

    ctx = ListContext(lab)
    nemesis = Nemesis(ctx, Ledger.for_lab(lab.name), random.Random(1))
    entry = nemesis.start(Step("power-loss", "node:n1", quiet_s=0, hold_s=0))
    assert entry is not None and Ledger.for_lab(lab.name).entries()[0]["fault"] == "power-loss"
    assert node.state() == "dead"
    off = ctx.events[-1]
    assert off["f"] == "power-off" and off["value"]["nodes"] == ["n1"]
    lost = {f["file"]: f["lost_bytes"] for f in off["value"]["lost"]["n1"]["files"]}
    assert lost["gregor-unsynced"] == 30000 and "gregor-synced" not in lost

    on = nemesis.stop(entry)
    assert on["started"] == ["n1"] and node.state() == "running"
    assert Ledger.for_lab(lab.name).entries() == []
    assert size_on(node, synced) == "20000"
    assert size_on(node, unsynced) in ("0", "gone")
    lab.wait_healthy(timeout=90)


def test_a_lone_leader_on_powerfs_dies_by_a_power_cut_and_comes_back(lab):
    """lone-leader's end on this lab: the ISR's last member loses power, not
    just its process, so the records it took are gone unless fsynced."""
    from confluent_kafka import Producer

    lab.admin().create_topic("lone", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": lab.bootstrap_servers, "acks": "all"})
    for value in range(200):
        producer.produce("lone", value=str(value).encode(), partition=0)
    assert producer.flush(30) == 0
    ctx = ListContext(lab, keys={"0": ["lone", 0]})
    nemesis = Nemesis(ctx, Ledger.for_lab(lab.name), random.Random(1))
    entry = nemesis.start(Step("lone-leader", "leader:0", quiet_s=0, hold_s=0))
    assert entry is not None
    start = ctx.events[-1]
    assert start["f"] == "start-lone-leader" and start["value"]["death"] == "power-loss"
    (leader,) = start["value"]["nodes"]
    assert lab.node(leader).state() == "dead"
    assert start["value"]["lost_bytes"] > 0  # the partition's records were never fsynced
    healed = nemesis.stop(entry)
    assert healed["healed"] == [leader] and healed["started"] == [leader]
    assert lab.node(leader).state() == "running" and Ledger.for_lab(lab.name).entries() == []
    lab.wait_healthy(timeout=90)


def test_a_backend_without_powerfs_refuses_the_fault_in_one_line():
    from harness.controller.run_cli import check_faults_possible

    with pytest.raises(GregorError, match="docker backend cannot inject power-loss"):
        check_faults_possible("docker", [POWER_LOSS])
    with pytest.raises(GregorError, match="cannot cut power"):
        Lab.up(name=lab_name("pwrd"), storage="powerfs", backend="docker", progress=None)
