"""Broker sources on a real lab: the wire relay on the brokers' own connections to each other
(on the namespaces backend one relay on this host entering the nodes' namespaces; on docker and
ssh one relay on each node, shipped as a zipapp), real Kafka brokers, a real transactional
librdkafka producer, real iptables. A delay rule on WriteTxnMarkers takes the markers the
coordinator sends, one on AddPartitionsToTxn the leaders' verification requests; nothing is left
behind, also after a crashed run.

The WriteTxnMarkers test runs on every backend of $GREGOR_TEST_BACKENDS; the others on the first
only (unless $GREGOR_TEST_EVERY_BACKEND), to keep the default suite's time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from nemesis_lab_helpers import gregor_run
from test_lab_wire import TxnClient, wire_heals, wire_rules_in

from ground.faults import WIRE
from harness.wire.places import ZIPAPP, relays
from harness.wire_relay import brokers_tag
from nemesis import wire
from nemesis.ledger import Ledger

pytestmark = [pytest.mark.lab]

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
DELAY_MS = 300
TRANSACTIONS = 5
# Each process's command line, one a line (the relay's, on a node, names the zipapp).
_COMMAND_LINES = "for p in /proc/[0-9]*; do tr '\\0' ' ' < \"$p/cmdline\" 2>/dev/null; echo; done"


@pytest.fixture
def place(lab):
    found = lab.client_place("bw1")
    yield found
    lab.sweep_wire()
    lab.remove_client_place("bw1")


def node_namespaces(lab) -> list[str]:
    return [node.namespace for node in lab.nodes]


def broker_wire_left(lab) -> list[str]:
    """The brokers' relays and their gregor-wire rules still there: on this host and in the nodes'
    namespaces (local), or on each node (docker, ssh), with the relay's control socket."""
    tag = brokers_tag(lab.name)
    if lab.backend.name == "local":
        left = [f"relay {pid}" for pid in relays(tag)] + wire_rules_in(node_namespaces(lab))
        return left + ([f"socket of {tag}"] if os.path.exists(f"/tmp/gregor-wire-{tag}.sock") else [])
    left = []
    for node in lab.nodes:
        rules = node.exec(["iptables-save", "-t", "nat"]).stdout
        left += [f"{node.name}: {line}" for line in rules.splitlines() if "gregor-wire:" in line]
        lines = node.exec(["sh", "-c", _COMMAND_LINES]).stdout.splitlines()
        left += [f"{node.name}: relay {line}" for line in lines if ZIPAPP in line and f" {tag} " in line]
        if node.exec(["test", "-e", f"/tmp/gregor-wire-{tag}.sock"], check=False).returncode == 0:
            left.append(f"{node.name}: socket of {tag}")
    return left


def nothing_left(lab) -> None:
    assert relays(brokers_tag(lab.name)) == [] and relays(lab.name) == []
    assert broker_wire_left(lab) == []


def delayed_under(lab, place, api: str) -> dict:
    """TRANSACTIONS transactions of a fresh producer on a new topic with a delay rule on `api`
    switched on for every broker's own requests; what the relay did under it. The relay is
    swept afterwards, whatever happened."""
    topic = f"bw-{api.lower()}-{int(time.time())}"
    lab.admin(timeout=15).create_topic(topic, 1, replication_factor=3)
    lab.wait_healthy(topics=[topic], timeout=60)
    try:
        return _delayed(lab, topic, place, api)
    finally:
        lab.sweep_wire()


def _delayed(lab, topic: str, place, api: str) -> dict:
    served = lab.start_broker_wire()
    lab.wait_healthy(topics=[topic], timeout=60)
    rule = {"action": "delay", "api": api, "delay_ms": DELAY_MS, "netns": list(served["places"].values())}
    lab.wire_call({"op": "add", "rule": dict(rule, id="bw-delay")}, brokers=True)
    client = TxnClient(place.handle["netns"], lab.bootstrap_servers, f"bw-{topic}", topic)
    try:
        client.transactions(TRANSACTIONS)
        time.sleep(DELAY_MS / 1000 + 0.5)  # the last commit's markers leave the relay after the commit returns
        done = wire.heal(lab, {"id": "bw-delay", "relay": "brokers"})
        status = lab.wire_call({"op": "status"}, brokers=True)
    finally:
        client.close()
    return {"served": served, "done": done, "status": status}


def test_a_delay_rule_on_writetxnmarkers_takes_the_markers_the_brokers_send(lab, place):
    found = delayed_under(lab, place, "WriteTxnMarkers")
    done, status = found["done"], found["status"]
    print("WriteTxnMarkers rule:", json.dumps({k: v for k, v in done.items() if k != "requests"}))
    print("cut at start:", found["served"]["cut"], "reopened through the relay:", found["served"]["reconnected"])
    # the connections the brokers had opened before the relay were cut once, and reopened through it
    served = found["served"]
    assert all(served["reconnected"][node] for node, cut in served["cut"].items() if cut), served
    # each commit's markers reach the partition's leader as at least one WriteTxnMarkers request
    assert done["rule_off"] and done["took"] >= TRANSACTIONS
    assert done["by_api"] == {"WriteTxnMarkers": done["took"]}
    assert done["forwarded"] == done["took"] and done["answered"] == done["took"]
    for request in done["requests"]:
        assert request["forwarded_at"] - request["t"] >= DELAY_MS / 1000 - 0.01
        assert request["client_id"].startswith("broker-")  # the coordinator's own client, not ours
    assert status["refused"] == status["desync"] == 0 and status["rules"] == []
    nothing_left(lab)


@pytest.mark.first_backend_only
def test_a_delay_rule_on_addpartitionstotxn_takes_the_leaders_verification(lab, place):
    found = delayed_under(lab, place, "AddPartitionsToTxn")
    done = found["done"]
    print("AddPartitionsToTxn rule:", json.dumps({k: v for k, v in done.items() if k != "requests"}))
    # Kafka 3.9's leaders verify each transaction's first produce with the coordinator (verify-only, v4+)
    assert done["rule_off"] and done["took"] >= TRANSACTIONS
    assert done["by_api"] == {"AddPartitionsToTxn": done["took"]}
    assert all(request["version"] >= 4 for request in done["requests"]), done["requests"]
    for request in done["requests"]:
        assert request["forwarded_at"] - request["t"] >= DELAY_MS / 1000 - 0.01
    nothing_left(lab)


@pytest.mark.first_backend_only
def test_a_crashed_broker_source_run_leaves_nothing_its_heal_does_not_sweep(lab, tmp_path):
    run = subprocess.Popen(
        [GREGOR, "run", "--workload", "txn", "--lab", lab.name, "--backend", lab.backend.name, "--store", str(tmp_path)]
        + ["--time-limit", "120", "--no-check", "--concurrency", "4", "--rate", "40", "--seed", "5"]
        + ["--nemesis", WIRE, "--nemesis-targets", "coordinator", "--nemesis-interval", "2"]
        + ["--wire-rule", "hold:api=WriteTxnMarkers:ms=60000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ledger = Ledger.for_lab(lab.name)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(e.get("relay") == "brokers" for e in ledger.entries()):
        time.sleep(0.2)
    try:
        assert any(e.get("relay") == "brokers" for e in ledger.entries()), "no broker-source wire fault began"
        time.sleep(1.0)  # let the hold take a marker request
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    # the crash left the brokers' relay running and its REDIRECT rules in the nodes' namespaces
    left = broker_wire_left(lab)
    print("left by the crash:", left)
    assert any(" relay " in f" {what}" for what in left), "the brokers' relay did not outlive the crashed run"
    assert any("REDIRECT" in what for what in left), left
    from harness.controller.run import heal_before

    heal_before(lab)  # what the next `gregor run` does first
    assert ledger.entries() == []
    nothing_left(lab)


@pytest.mark.first_backend_only
def test_a_txn_run_with_a_delay_rule_on_the_coordinators_markers_is_valid(lab, tmp_path):
    run_dir, history, test = gregor_run(
        lab, tmp_path, "--workload", "txn", "--time-limit", "20", "--seed", "2", "--nemesis", WIRE,
        "--nemesis-targets", "coordinator", "--wire-rule", "delay:api=WriteTxnMarkers:ms=200",
        "--nemesis-interval", "3", timeout=600, check=True,
    )  # fmt: skip
    assert json.load(open(os.path.join(run_dir, "results.json")))["verdict"] == "valid"
    assert "wire_relay" not in test  # no client target: the clients' relay is not started
    served = test["wire_brokers"]
    assert served["final"]["refused"] == served["final"]["desync"] == 0
    assert all(served["reconnected"][node] for node, cut in served["cut"].items() if cut), served
    heals = wire_heals(history)
    print("heals:", [{k: h.get(k) for k in ("nodes", "took", "delayed", "by_api")} for h in heals])
    print("wire_brokers:", json.dumps({k: v for k, v in test["wire_brokers"].items() if k != "ports"}))
    assert heals and all(h["rule_off"] and h["nodes"] for h in heals)
    assert sum(h["delayed"] for h in heals) > 0, "the rule never took a request: the run proves nothing"
    assert all(set(h["by_api"]) <= {"WriteTxnMarkers"} for h in heals)
    nothing_left(lab)
