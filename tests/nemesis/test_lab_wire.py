"""The wire fault on a real lab: the relay between a client's namespace and the brokers, real
librdkafka clients, real iptables; a delay rule takes exactly its API, its heal breaks no
connection, a crashed run leaves nothing its heal does not sweep, and a real run stays valid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from nemesis_lab_helpers import gregor_run

from ground.faults import WIRE
from harness.wire.places import relays
from nemesis import wire
from nemesis.ledger import Ledger

pytestmark = [pytest.mark.lab, pytest.mark.first_backend_only]

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
DELAY_MS = 400

# One transactional producer in the client's namespace: each line "go" on stdin is one
# transaction (one record, flushed, committed); each answer is its two latencies.
TXN_CLIENT = """
import json, sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2], "linger.ms": 0})
p.init_transactions(30)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    p.begin_transaction()
    t0 = time.monotonic()
    p.produce(sys.argv[3], b"v", partition=0)
    p.flush(30)
    t1 = time.monotonic()
    p.commit_transaction(30)
    t2 = time.monotonic()
    print(json.dumps({"produce_s": t1 - t0, "commit_s": t2 - t1}), flush=True)
"""


class TxnClient:
    def __init__(self, namespace: str, bootstrap: str, txn_id: str, topic: str):
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-c", TXN_CLIENT, bootstrap, txn_id, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert json.loads(self.process.stdout.readline()) == {"ready": True}

    def transactions(self, n: int) -> list[dict]:
        out = []
        for _ in range(n):
            self.process.stdin.write("go\n")
            self.process.stdin.flush()
            out.append(json.loads(self.process.stdout.readline()))
        return out

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def wire_rules_in(namespaces: list[str]) -> list[str]:
    """Every gregor-wire iptables rule on this host and in these namespaces."""
    found = []
    for namespace in [None, *namespaces]:
        command = ["iptables-save", "-t", "nat"]
        if namespace:
            command = ["ip", "netns", "exec", namespace, *command]
        out = subprocess.run(command, capture_output=True, text=True).stdout
        found += [f"{namespace}: {line}" for line in out.splitlines() if "gregor-wire:" in line]
    return found


def lab_namespaces(lab_name: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"{lab_name}-")]


@pytest.fixture
def place(lab):
    found = lab.client_place("wt1")
    yield found
    lab.sweep_wire()
    lab.remove_client_place("wt1")


def test_a_delay_rule_delays_exactly_its_api_and_its_heal_breaks_no_connection(lab, place):
    topic = f"wire-delay-{int(time.time())}"
    lab.admin(timeout=15).create_topic(topic, 1, replication_factor=3)
    lab.wait_healthy(topics=[topic], timeout=60)
    served = lab.start_wire([place])
    client = TxnClient(served["places"]["wt1"], lab.bootstrap_servers, f"wt-{topic}", topic)
    try:
        before = client.transactions(5)
        opened = {link["link"] for link in lab.wire_call({"op": "links"})["links"]}
        rule = {"action": "delay", "api": "EndTxn", "delay_ms": DELAY_MS, "netns": served["places"]["wt1"]}
        lab.wire_call({"op": "add", "rule": dict(rule, id="wt-delay")})
        during = client.transactions(5)
        done = wire.heal(lab, {"id": "wt-delay"})
        after = client.transactions(5)
        status = lab.wire_call({"op": "status"})
        still = {link["link"] for link in lab.wire_call({"op": "links"})["links"] if link["client_open"]}
    finally:
        client.close()
    # every EndTxn of the rule's window, and nothing else, was taken and came DELAY_MS late
    assert done["rule_off"] and done["took"] == done["delayed"] == 5 and done["by_api"] == {"EndTxn": 5}
    for request in done["requests"]:
        assert request["forwarded_at"] - request["t"] >= DELAY_MS / 1000 - 0.01
    assert all(t["commit_s"] >= DELAY_MS / 1000 for t in during), during
    assert all(t["produce_s"] < DELAY_MS / 1000 for t in during), during
    assert all(t["commit_s"] < DELAY_MS / 1000 for t in before + after), (before, after)
    # neither the rule nor its heal closed a connection: every one open before is open after
    assert opened and opened <= still, (opened, still)
    assert status["refused"] == status["desync"] == 0
    assert status["rules"] == []


def test_heal_in_run_switches_every_rule_off_and_keeps_the_relay_and_the_place(lab, place):
    """What a run's nemesis does when one heal failed: its clients go on through the same relay."""
    topic = f"wire-inrun-{int(time.time())}"
    lab.admin(timeout=15).create_topic(topic, 1, replication_factor=3)
    lab.wait_healthy(topics=[topic], timeout=60)
    served = lab.start_wire([place])
    namespace = served["places"]["wt1"]
    client = TxnClient(namespace, lab.bootstrap_servers, f"wt-{topic}", topic)
    try:
        rule = {"action": "delay", "api": "EndTxn", "delay_ms": DELAY_MS, "netns": namespace}
        lab.wire_call({"op": "add", "rule": dict(rule, id="wt-inrun")})
        during = client.transactions(2)
        cleared = lab.heal_in_run()
        after = client.transactions(3)
        status = lab.wire_call({"op": "status"})
    finally:
        client.close()
    assert all(t["commit_s"] >= DELAY_MS / 1000 for t in during), during
    assert cleared == {"clients": 1, "brokers": 0}
    assert all(t["commit_s"] < DELAY_MS / 1000 for t in after), after
    assert status["rules"] == [] and status["refused"] == status["desync"] == 0
    assert relays(lab.name), "heal_in_run ended the relay"
    assert namespace in lab_namespaces(lab.name) and wire_rules_in([namespace])


def test_a_crashed_wire_run_leaves_nothing_its_heal_does_not_sweep(lab, tmp_path):
    name, backend = lab.name, lab.backend.name
    run = subprocess.Popen(
        [GREGOR, "run", "--workload", "txn", "--lab", name, "--backend", backend, "--store", str(tmp_path)]
        + ["--time-limit", "120", "--no-check", "--concurrency", "4", "--rate", "40", "--seed", "5"]
        + ["--nemesis", WIRE, "--wire-rule", "hold:api=EndTxn:ms=60000", "--nemesis-interval", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ledger = Ledger.for_lab(name)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(e.get("fault") == WIRE for e in ledger.entries()):
        time.sleep(0.2)
    try:
        assert any(e.get("fault") == WIRE for e in ledger.entries()), "no wire fault began"
        time.sleep(1.0)  # let the hold take a request
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    # the crash left the relay running and its REDIRECT rules in the clients' namespaces
    assert relays(name), "the relay did not outlive the crashed run"
    assert wire_rules_in(lab_namespaces(name))
    from harness.controller.run import heal_before

    heal_before(lab)  # what the next `gregor run` does first
    assert relays(name) == []
    assert wire_rules_in(lab_namespaces(name)) == []
    assert ledger.entries() == []
    assert not os.path.exists(f"/tmp/gregor-wire-{name}.sock")


def wire_heals(history: list[dict]) -> list[dict]:
    """What each stop-wire of a run recorded (the relay's report of its rule)."""
    return [
        e["value"]
        for e in history
        if e.get("process") == "nemesis" and e["type"] == "info" and "rule_off" in e["value"]
    ]


def test_a_txn_run_with_a_small_delay_rule_is_valid(lab, tmp_path):
    run_dir, history, _ = gregor_run(
        lab, tmp_path, "--workload", "txn", "--time-limit", "20", "--seed", "2", "--nemesis", WIRE,
        "--wire-rule", "delay:api=EndTxn:ms=200", "--nemesis-interval", "3", timeout=600, check=True,
    )  # fmt: skip
    assert json.load(open(os.path.join(run_dir, "results.json")))["verdict"] == "valid"
    heals = wire_heals(history)
    assert heals and all(h["rule_off"] for h in heals)
    assert sum(h["delayed"] for h in heals) > 0, "the rule never took a request: the run proves nothing"
    assert relays(lab.name) == [] and wire_rules_in(lab_namespaces(lab.name)) == []
