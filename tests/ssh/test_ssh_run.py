"""`gregor run` over SSH against hosts running OpenSSH's sshd: a crashed run's
fault is healed by the next run, a 60 s queue run with partitions, pauses and
kills comes out valid with every fault healed, a lab whose hosts are no
longer where they were is refused without a request to its brokers, and
`gregor lab down` leaves nothing of ours on the hosts, also when the
controller lost the lab's state file.

The hosts are containers of the node image (tests/ssh_hosts.py); the test
reaches them only through SSH, as it would VMs or bare metal.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from backend_params import lab_name
from packet_counter import PacketCounter
from polling import wait_until

from harness import netfaults, registry
from harness.backends import ssh_alive
from harness.backends.ssh_sandbox import keygen
from harness.lab import Lab, read_state, state_path
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


def refused_run(store) -> str:
    """`gregor run` on the lab with no hosts given (they come from its state file): its one-line refusal."""
    run = gregor("run", "--lab", LAB, "--backend", "ssh", "--workload", "queue", "--time-limit", "5", "--store", store)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "reusing" not in run.stdout and not os.path.exists(os.path.join(store, "latest"))
    refusal = run.stderr.strip()
    assert "\n" not in refusal and f"lab {LAB!r} is stale" in refusal, refusal
    assert refusal.endswith(f"run: gregor lab down --lab {LAB} --backend ssh"), refusal
    return refusal


@contextlib.contextmanager
def detour(address: str):
    """This host's route to `address` into a veth leading nowhere: as when the
    network a host was on went away and its address is now routed elsewhere."""
    device = f"gdt{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", device, "type", "veth", "peer", "name", f"{device}p"], check=True)
    try:
        subprocess.run(["ip", "link", "set", device, "up"], check=True)
        subprocess.run(["ip", "route", "add", f"{address}/32", "dev", device], check=True)
        yield device
    finally:
        subprocess.run(["ip", "link", "del", device], capture_output=True)


def test_a_lab_whose_network_moved_is_refused_with_no_packet_to_its_hosts(lab, tmp_path):
    addresses = [node.address for node in lab.nodes]
    with PacketCounter(addresses, new_only=True) as sent:  # any port: SSH too
        socket.create_connection((addresses[0], 22), timeout=5).close()  # the counter counts
        assert sent.count() > 0
        before = sent.count()
        with detour(addresses[1]) as device:
            refusal = refused_run(str(tmp_path / "store"))
            assert f"{addresses[1]} via {device} (was " in refusal and "network its machines were on is gone" in refusal
            status = gregor("lab", "status", "--lab", LAB, "--backend", "ssh")
            assert status.returncode == 1 and "STALE: the route to" in status.stdout, status.stdout + status.stderr
            assert sent.count() == before, "a packet went to the hosts of a stale lab"
    # A state file from before routes were recorded: the SSH handshakes decide, and the routes are recorded then
    state = read_state(LAB)
    recorded = state["backend"].pop("routes")
    state_path(LAB).write_text(json.dumps(state))
    status = gregor("lab", "status", "--lab", LAB, "--backend", "ssh")
    assert status.returncode == 0 and "active controller: n" in status.stdout, status.stdout + status.stderr
    assert read_state(LAB)["backend"]["routes"] == recorded == ssh_alive.routes(addresses)


@contextlib.contextmanager
def another_machine_at(sandbox, index: int, tmp_path):
    """Host `index` answers with another host key: another machine now has its address.
    sshd reads its key for every new connection; the old key comes back afterwards."""
    other = str(tmp_path / "other_host_key")
    keygen(other, "another machine")
    original = Path(sandbox.directory, f"host{index + 1}").read_bytes()
    sandbox.put(index, {"/etc/ssh/ssh_host_ed25519_key": (Path(other).read_bytes(), 0o600)})
    try:
        yield
    finally:
        sandbox.put(index, {"/etc/ssh/ssh_host_ed25519_key": (original, 0o600)})


def test_a_host_with_another_host_key_makes_the_lab_stale_before_any_request_to_a_broker(lab, sandbox, tmp_path):
    addresses = [node.address for node in lab.nodes]
    ports = sorted({port for node in lab.nodes for port in node.service.ports})
    with (
        PacketCounter(addresses, ports, new_only=True) as to_brokers,
        PacketCounter(addresses, [22], new_only=True) as to_sshd,
    ):
        lab.cluster_info()  # the counter sees requests to the brokers
        assert to_brokers.count() > 0
        before = to_brokers.count()
        with another_machine_at(sandbox, 2, tmp_path):
            refusal = refused_run(str(tmp_path / "store"))
        assert f"{lab.nodes[2].name} ({sandbox.hosts[2].where()}): the host key has CHANGED" in refusal, refusal
        assert to_sshd.count() >= 3, "one handshake with each host was what it sent"
        assert to_brokers.count() == before, "a request went to the brokers of a stale lab"
    assert gregor("lab", "status", "--lab", LAB, "--backend", "ssh").returncode == 0  # its own key back: reused


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
