"""Short faulted runs on every system besides Kafka 3.9.1 (which
tests/nemesis/test_run_with_faults.py covers): kfake, the newest Kafka 4.x
on Maven Central (with a dedicated controller), Tansu over PostgreSQL, and a
cluster Gregor did not start (external).

Each asserts that the run completes, is healed and is checked, and that the
anomalies reported agree with the history, never that a system is correct:
a system Gregor finds broken is a finding, not a failing test.
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ground.protocols import RoleUnavailable
from harness import netfaults
from nemesis.faults import Nemesis
from nemesis.ledger import Ledger
from nemesis.schedule import Step

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent.parent


def gregor(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def faulted_run(lab, store, *args: str, seed: int = 6) -> tuple[int, str, list[dict], dict, dict]:
    """`gregor run` (checked) against the lab: exit code, run dir, history, test.json, results.json.

    Seed 6 plans, in the first 18 s, a pause, a partition and a kill whose
    targets (majority, minority, one, client) exist on every system."""
    result = gregor(
        "run",
        "--lab",
        lab.name,
        "--system",
        lab.system.name,
        "--store",
        str(store),
        "--time-limit",
        "20",
        "--nemesis-interval",
        "3",
        "--seed",
        str(seed),
        *args,
    )
    assert result.returncode in (0, 1, 3), result.stderr[-3000:]  # valid, invalid or unknown: it was checked
    run_dir = sorted(glob.glob(os.path.join(str(store), "*", "2*")))[-1]
    history = [json.loads(line) for line in open(os.path.join(run_dir, "history.jsonl")) if line.strip()]
    test = json.load(open(os.path.join(run_dir, "test.json")))
    results = json.load(open(os.path.join(run_dir, "results.json")))
    assert os.path.isfile(os.path.join(run_dir, "report.html"))
    return result.returncode, run_dir, history, test, results


class Recorder:
    """The part of a run's context the nemesis uses: the lab and a list of events."""

    def __init__(self, lab):
        self.lab, self.test, self.events = lab, {"keys": {}}, []

    def record(self, event: dict) -> dict:
        self.events.append(dict(event, index=len(self.events)))
        return self.events[-1]


def applied(history, f):
    return [
        e
        for e in history
        if e.get("process") == "nemesis"
        and e["type"] == "info"
        and e["f"] == f
        and "skipped" not in e["value"]
        and "failed" not in e["value"]
    ]


def assert_healed(lab, history):
    """Every fault applied was healed; nothing is left: rules, paused or dead processes, the ledger."""
    for start, stop in (("start-partition", "stop-partition"), ("pause", "resume"), ("kill", "start")):
        assert len(applied(history, start)) == len(applied(history, stop)), start
    for node in lab.nodes:
        assert netfaults.rules(node) == [], node.name
        if node.service is not None:
            assert node.state() == "running", node.name
    assert Ledger.for_lab(lab.name).entries() == []
    assert lab.client_places() == []


def must_have_happened(history) -> set[tuple[int, int]]:
    """docs/ANOMALIES.md: sends of ok ops, and every send of an info transaction one of whose sends an ok op read."""
    read = values_read(history)
    done = set()
    for event in history:
        sends = [(m["key"], m["value"]) for m in event.get("mops") or () if m.get("f") == "send"]
        if event.get("type") == "ok" or (
            event.get("type") == "info" and event.get("f") == "txn" and any(s in read for s in sends)
        ):
            done.update(sends)
    return done


def values_read(history) -> dict[tuple[int, int], set[int]]:
    """(key, value) -> the offsets at which ok polls returned it."""
    read: dict[tuple[int, int], set[int]] = {}
    for event in history:
        if event.get("type") == "ok" and isinstance(event.get("process"), int):
            for mop in event.get("mops") or ():
                if mop.get("f") == "poll":
                    read.setdefault((mop["key"], mop["value"]), set()).add(mop["offset"])
    return read


def aborted_reads(history) -> int:
    """docs/ANOMALIES.md counts every ok poll of a value a `fail` op sent, so a value
    read again (a replacement consumer re-reads its keys from the beginning) counts again."""
    failed: dict[tuple[int, int], int] = {}
    for event in history:
        if event.get("type") == "fail":
            for mop in event.get("mops") or ():
                if mop.get("f") == "send":
                    kv = (mop["key"], mop["value"])
                    failed[kv] = failed.get(kv, 0) + 1
    return sum(
        failed.get((mop["key"], mop["value"]), 0)
        for event in history
        if event.get("type") == "ok" and isinstance(event.get("process"), int)
        for mop in event.get("mops") or ()
        if mop.get("f") == "poll"
    )


def count(results, name) -> int:
    return results["anomalies"].get(name, {}).get("count", 0)


def assert_anomalies_agree_with_history(history, test, results):
    """The counts the checker reports follow from the history by the definitions."""
    read = values_read(history)
    unread = must_have_happened(history) - set(read)
    assert count(results, "lost-write") + count(results, "unseen") == len(unread)
    assert count(results, "duplicate") == sum(1 for offsets in read.values() if len(offsets) > 1)
    assert count(results, "aborted-read") == aborted_reads(history)
    bad = [name for name, a in results["anomalies"].items() if a["count"] and not a["allowed"]]
    assert (results["verdict"] == "invalid") == bool(bad)
    if not bad:
        assert results["verdict"] == ("valid" if test["drain"]["complete"] else "unknown")
    indices = {e["index"] for e in history}
    for anomaly in results["anomalies"].values():
        for example in anomaly["examples"]:
            assert set(example.get("ops", [])) <= indices


def test_kfake_txn_run_with_pause_kill_and_client_partitions(system_lab, tmp_path):
    lab = system_lab("kfk", system="kfake", nodes=3)
    code, run_dir, history, test, results = faulted_run(
        lab, tmp_path, "--workload", "txn", "--nemesis", "partition,pause,kill"
    )
    assert test["setup"]["system"] == "kfake" and test["setup"]["transaction.version"] == 2
    assert sorted(test["cluster"]["brokers"]) == ["0", "1", "2"] and [n["name"] for n in test["nodes"]] == ["n1"]
    assert applied(history, "pause") and applied(history, "kill")
    assert all(e["value"]["nodes"] == [] and e["value"]["clients"] for e in applied(history, "start-partition"))
    assert_healed(lab, history)
    assert_anomalies_agree_with_history(history, test, results)


def test_newest_kafka_4_txn_run_with_a_dedicated_controller(system_lab, tmp_path):
    from harness.systems.kafka.install import maven_versions

    newest = [v for v in maven_versions() if int(v.split(".")[0]) >= 4][-1]
    lab = system_lab("k4", system="kafka", version=newest, nodes=3, system_options={"controllers": 1})
    assert [n.name for n in lab.nodes] == ["n1", "n2", "n3", "k1"]
    code, run_dir, history, test, results = faulted_run(
        lab,
        tmp_path,
        "--workload",
        "txn",
        "--version",
        newest,
        "--controllers",
        "1",
        "--nemesis",
        "partition,pause,kill",
    )
    assert test["version"] == newest and test["setup"]["transaction.version"] == 2
    assert test["setup"]["controllers"] == "1 dedicated (k1..k1)"
    assert_healed(lab, history)
    assert_anomalies_agree_with_history(history, test, results)

    # the controller kill is aimed at the active controller, the dedicated node
    ctx = Recorder(lab)
    nemesis = Nemesis(ctx, Ledger.for_lab(lab.name), random.Random(1))
    entry = nemesis.start(Step("kill", "controller", 1, 1))
    assert ctx.events[-1]["value"]["killed"] == ["k1"] and lab.node("k1").state() == "dead"
    nemesis.stop(entry)
    assert lab.node("k1").state() == "running"


@pytest.mark.tansu_build
def test_tansu_queue_run_over_postgresql_and_the_refusal_of_txn(system_lab, tmp_path):
    from harness.systems.tansu import install, postgres

    install.install(progress=print)  # waits for setup's background build, or builds
    lab = system_lab("tns", system="tansu", nodes=3)
    assert postgres.running(lab.name) is not None
    with pytest.raises(RoleUnavailable, match="names no single node"):
        lab.roles().leader("gregor-health", 0)
    with pytest.raises(RoleUnavailable, match="no controller"):
        lab.roles().controller()

    refused = gregor("run", "--lab", lab.name, "--system", "tansu", "--workload", "txn", "--store", str(tmp_path))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "gregor: error: tansu 0.6.0 cannot serve the txn workload: its brokers do not advertise EndTxn "
        "(API key 26) in ApiVersions (choose another --workload)"
    ]

    code, run_dir, history, test, results = faulted_run(
        lab, tmp_path, "--workload", "queue", "--nemesis", "partition,pause,kill"
    )
    assert test["setup"]["storage"].startswith("PostgreSQL") and "transaction.version" not in test["setup"]
    assert "26" not in test["cluster"]["api_versions"]
    assert applied(history, "pause") and applied(history, "kill") and applied(history, "start-partition")
    assert_healed(lab, history)
    assert_anomalies_agree_with_history(history, test, results)


def test_external_run_against_a_cluster_gregor_did_not_start(system_lab, tmp_path):
    source = system_lab("xsrc", system="kafka", nodes=3)
    bootstrap = source.bootstrap_servers
    secret = "hunter2-never-written"
    lab = system_lab("xext", system="external", nodes=3, system_options={"bootstrap": bootstrap})
    assert lab.nodes == [] and lab.bootstrap_servers == bootstrap
    code, run_dir, history, test, results = faulted_run(
        lab,
        tmp_path,
        "--workload",
        "queue",
        "--bootstrap",
        bootstrap,
        "--nemesis",
        "partition,pause",
        "--client-config",
        "security.protocol=PLAINTEXT",
        "--client-config",
        f"sasl.password={secret}",
        seed=0,
    )  # a partition and a pause of clients in the first 18 s
    assert test["cluster"]["cluster_id"] == source.system.state()["cluster_id"]
    assert sorted(test["cluster"]["brokers"]) == ["1", "2", "3"]
    assert test["client_config_keys"] == ["sasl.password", "security.protocol"]
    cuts = applied(history, "start-partition")
    assert cuts and all(sorted(c["value"]["cut_from"]) == sorted(n.address for n in source.nodes) for c in cuts)
    assert_healed(lab, history)
    assert_anomalies_agree_with_history(history, test, results)
    for path in Path(run_dir).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_external_cluster_behind_sasl_scram(system_lab, tmp_path):
    """A secured cluster: every client, the admin client, the drain and Gregor's own
    requests (ApiVersions, Metadata) authenticate with --client-config; a wrong
    password fails in one line; the password reaches no file of the run."""
    from harness.systems.kfake import build

    source = system_lab("sasl", system="kfake", nodes=1)
    node = source.nodes[0]
    secret = "scram-secret-never-written"
    server = build.installed(source.version).binary
    node.spawn(
        [
            str(server),
            "--listen",
            node.address,
            "--ports",
            "19092",
            "--cluster-id",
            "gregor-sasl",
            "--sasl-user",
            f"SCRAM-SHA-256:gregor:{secret}",
        ],
        log=f"{node.home}/sasl.log",
        pid_file=f"{node.home}/sasl.pid",
    )
    bootstrap = f"{node.address}:19092"
    config = [
        "--client-config",
        "security.protocol=SASL_PLAINTEXT",
        "--client-config",
        "sasl.mechanism=SCRAM-SHA-256",
        "--client-config",
        "sasl.username=gregor",
    ]
    wrong = gregor(
        "lab",
        "up",
        "--lab",
        source.name + "x",
        "--system",
        "external",
        "--bootstrap",
        bootstrap,
        *config,
        "--client-config",
        "sasl.password=wrong",
    )
    assert wrong.returncode == 2 and "SASL SCRAM-SHA-256 authentication failed as 'gregor'" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1

    lab = system_lab(
        "saslx",
        system="external",
        nodes=1,
        system_options={"bootstrap": bootstrap},
        client_config={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "gregor",
            "sasl.password": secret,
        },
    )
    result = gregor(
        "run",
        "--lab",
        lab.name,
        "--system",
        "external",
        "--bootstrap",
        bootstrap,
        "--nodes",
        "1",
        "--replication-factor",
        "1",
        "--workload",
        "queue",
        "--time-limit",
        "8",
        "--no-check",
        "--store",
        str(tmp_path),
        *config,
        "--client-config",
        f"sasl.password={secret}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = sorted(glob.glob(os.path.join(str(tmp_path), "*", "2*")))[-1]
    test = json.load(open(os.path.join(run_dir, "test.json")))
    assert test["cluster"]["cluster_id"] == "gregor-sasl" and test["drain"]["complete"]
    assert test["main_phase"]["acked_sends"] > 0
    for path in Path(run_dir).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
