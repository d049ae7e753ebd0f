"""`gregor run` over SSH against hosts running OpenSSH's sshd: a crashed run's
fault is healed by the next run, a 60 s queue run with partitions, pauses and
kills comes out valid with every fault healed, and `gregor lab down` leaves
nothing of ours on the hosts, also when the controller lost the lab's state file.

The hosts are containers of the node image (tests/ssh_hosts.py); the test
reaches them only through SSH, as it would VMs or bare metal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from backend_params import lab_name
from polling import wait_until

from harness import netfaults, registry
from harness.lab import Lab, state_path
from nemesis.ledger import Ledger

pytestmark = pytest.mark.lab

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
LAB = lab_name("ssr")


def gregor(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GREGOR, *argv], capture_output=True, text=True, timeout=timeout)


def leftovers(sandbox) -> list[str]:
    """What of the lab is on the hosts (processes, chains, qdiscs, files) or here (namespaces, rules, state)."""
    found = registry.backend("ssh", **sandbox.options()).leftovers(LAB)
    return found + ([f"state {state_path(LAB)}"] if state_path(LAB).exists() else [])


@pytest.fixture(scope="module")
def lab(sandbox):
    Lab.down(LAB, progress=None, backend="ssh", backend_options=sandbox.options())
    up = gregor("lab", "up", "--lab", LAB, *sandbox.flags(), timeout=600)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    yield Lab.attach(LAB, backend="ssh")
    Lab.down(LAB, progress=None, backend="ssh", backend_options=sandbox.options())
    assert leftovers(sandbox) == []


def crash_during(fault: str, sandbox, store, in_force) -> list[dict]:
    """Starts a run, SIGKILLs it (and its clients) once `fault` is in force on
    every node its ledger entry names (`in_force(node_name)`); the entries left."""
    ledger = Ledger.for_lab(LAB)
    run = subprocess.Popen(
        [
            GREGOR,
            "run",
            "--lab",
            LAB,
            *sandbox.flags(),
            "--workload",
            "queue",
            "--no-check",
            "--time-limit",
            "120",
            "--nemesis",
            fault,
            "--nemesis-interval",
            "10",
            "--nemesis-targets",
            "one",
            "--store",
            str(store),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (entries := [e for e in ledger.entries() if e.get("fault") == fault]):
            assert run.poll() is None and time.monotonic() < deadline, f"no {fault} fault came into force"
            time.sleep(0.05)
        # The entry is written just before the fault is applied, node by node
        # over SSH: wait until it holds on every node the entry names, however slow.
        wait_until(
            lambda: run.poll() is not None or all(in_force(name) for name in entries[0]["nodes"]),
            timeout=deadline - time.monotonic(),
            interval=0.1,
        )
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    return ledger.entries()


def test_a_crashed_run_leaves_its_partition_on_the_hosts(lab, sandbox, tmp_path):
    entries = crash_during("partition", sandbox, tmp_path, lambda name: netfaults.rules(lab.node(name)))
    cut = [name for entry in entries for name in entry["nodes"]]
    assert cut and all(netfaults.rules(lab.node(name)) for name in cut), "the partition was not in force"


def test_the_next_run_heals_it_and_60_s_of_faults_over_ssh_come_out_valid(lab, sandbox, tmp_path):
    store = tmp_path / "store"
    run = gregor(
        "run",
        "--lab",
        LAB,
        *sandbox.flags(),
        "--workload",
        "queue",
        "--time-limit",
        "60",
        "--nemesis",
        "partition,pause,kill",
        "--nemesis-interval",
        "5",
        "--client-netns",
        "--seed",
        "2",
        "--concurrency",
        "4",
        "--rate",
        "100",
        "--store",
        str(store),
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]  # 0: checked, valid
    assert "fault(s) left by an earlier run" in run.stdout
    run_dir = os.path.realpath(store / "latest")
    with open(os.path.join(run_dir, "results.json")) as handle:
        assert json.load(handle)["verdict"] == "valid"
    events = [json.loads(line) for line in open(os.path.join(run_dir, "history.jsonl"))]
    done = [
        e
        for e in events
        if e["process"] == "nemesis" and e["type"] == "info" and e["value"].get("nodes") and "failed" not in e["value"]
    ]
    assert {"start-partition", "pause", "kill"} <= {e["f"] for e in done}
    assert {"stop-partition", "resume", "start"} <= {e["f"] for e in done}  # each healed
    # healed, all of it: no rule, no paused or dead broker, no ledger entry
    assert Ledger.for_lab(LAB).entries() == []
    assert all(netfaults.rules(node) == [] and node.state() == "running" for node in lab.nodes)
    # the setup names the hosts and how their keys were checked; no key file anywhere
    with open(os.path.join(run_dir, "test.json")) as handle:
        setup = json.load(handle)["setup"]
    assert setup["backend"] == "ssh" and all(h.host in setup["hosts"] for h in sandbox.hosts)
    assert setup["host_keys"] == f"verified against {sandbox.known_hosts}"
    for name in ("test.json", "results.json", "report.html", "history.jsonl"):
        assert sandbox.key_file not in open(os.path.join(run_dir, name)).read()
    assert "SSH host keys" in open(os.path.join(run_dir, "report.html")).read()
    for node in lab.nodes:  # node logs came back over SFTP
        assert "Kafka Server started" in open(os.path.join(run_dir, "nodes", node.name, "broker.log")).read()


def test_lab_down_over_ssh_cleans_the_hosts_without_the_state_file(lab, sandbox, tmp_path):
    """A controller that crashed mid-pause and lost /run: `lab down --hosts` still finds it all."""
    entries = crash_during("pause", sandbox, tmp_path, lambda name: lab.node(name).state() == "paused")
    paused = [name for entry in entries for name in entry["nodes"]]
    assert paused and all(lab.node(name).state() == "paused" for name in paused)
    state_path(LAB).unlink()
    down = gregor("lab", "down", "--lab", LAB, *sandbox.flags(), timeout=300)
    assert down.returncode == 0, down.stderr
    assert f"{sandbox.hosts[0].where()}: " in down.stdout and "processes killed" in down.stdout
    assert leftovers(sandbox) == []
