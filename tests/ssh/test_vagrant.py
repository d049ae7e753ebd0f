"""A real `vagrant up` of the repository's Vagrantfile, `gregor run --backend ssh
--vagrant` on it, then `vagrant destroy -f` without `gregor lab down`: the
next `gregor run --backend ssh` (no hosts: the lab's state file names them)
is refused in one line with no packet to the destroyed machines' addresses,
and `gregor lab down` says in one line that nothing is left to clean.

Here the nodes are the Vagrantfile's docker provider (containers of the node
image running sshd; this machine cannot run VMs). The lab's state goes to a
folder of the test's own (VAGRANT_DOTFILE_PATH) and its private network gets
a subnet of its own, so a developer's own Vagrant lab at the repository
root is never touched. The one long test of the suite: keep the lab small.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from backend_params import lab_name
from packet_counter import PacketCounter

from harness.backends import docker_engine, netns
from harness.backends.ssh_hosts import SshHost
from harness.lab import read_state, state_path

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
LAB = lab_name("vag")


def run(argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, f"{' '.join(argv)}: " + result.stdout[-3000:] + result.stderr[-2000:]
    return result


@pytest.fixture(scope="module")
def vagrant(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the docker provider's lab and the client places need root")
    assert shutil.which("vagrant"), "vagrant not found; ./setup installs Debian's vagrant package"
    dotfile = tmp_path_factory.mktemp("vagrant") / ".vagrant"
    subnet = netns.lab_subnet(f"{LAB}net")
    env = {
        **os.environ,
        "VAGRANT_DOTFILE_PATH": str(dotfile),
        "GREGOR_NODES": "3",
        "GREGOR_SUBNET": str(subnet.network_address).rsplit(".", 1)[0],
    }
    containers = f"gregor-vagrant-{hashlib.sha1(str(dotfile).encode()).hexdigest()[:6]}-"
    lab_down(env)  # a lab of this name an earlier, killed session left on this machine
    assert read_state(LAB) is None, f"gregor lab down --lab {LAB} left its state file"
    try:
        yield env, dotfile, containers, subnet
    finally:  # what a failed test left: the Kafka lab, then the nodes
        lab_down(env)
        destroy = subprocess.run(
            ["vagrant", "destroy", "-f"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        print(destroy.stdout[-2000:], destroy.stderr[-2000:])


def lab_down(env: dict) -> None:
    subprocess.run(
        [GREGOR, "lab", "down", "--lab", LAB, "--backend", "ssh", "--vagrant", "."],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def ours(containers: str, subnet) -> list[str]:
    client = docker_engine.client(progress=lambda _m: None)
    found = [c.name for c in client.containers.list(all=True) if c.name.startswith(containers)]
    return found + [n.name for n in client.networks.list() if str(subnet) in n.name]


def test_vagrant_up_a_checked_txn_run_then_destroy_without_lab_down_is_refused_without_a_packet(
    vagrant, tmp_path, monkeypatch
):
    env, dotfile, containers, subnet = vagrant
    monkeypatch.setenv("VAGRANT_DOTFILE_PATH", env["VAGRANT_DOTFILE_PATH"])  # for the leftovers check here
    up = run(["vagrant", "up"], env, timeout=900)
    assert "with 'docker' provider" in up.stdout
    assert len([name for name in ours(containers, subnet) if name.startswith(containers)]) == 3

    addresses = [str(subnet.network_address + 10 + i) for i in (1, 2, 3)]  # the Vagrantfile's n1..n3
    store = tmp_path / "store"
    with PacketCounter(addresses, new_only=True) as to_nodes:
        result = run(
            [
                GREGOR,
                "run",
                "--backend",
                "ssh",
                "--vagrant",
                ".",
                "--lab",
                LAB,
                "--workload",
                "txn",
                "--nemesis",
                "partition,pause,kill",
                "--nemesis-interval",
                "6",
                "--time-limit",
                "30",
                "--store",
                str(store),
            ],
            env,
            timeout=1200,
        )
        assert to_nodes.count() > 0  # the counter sees the run's connections to the brokers
        run_dir = os.path.realpath(store / "latest")
        with open(os.path.join(run_dir, "results.json")) as handle:
            assert json.load(handle)["verdict"] == "valid", result.stdout[-3000:]
        with open(os.path.join(run_dir, "test.json")) as handle:
            setup = json.load(handle)["setup"]
        assert setup["host_keys"] == "verified against the keys the Vagrant lab made for its machines"
        assert os.path.getsize(os.path.join(run_dir, "report.html")) > 10_000
        assert all(f"n{i} root@" in setup["hosts"] for i in (1, 2, 3))
        assert [node["address"] for node in read_state(LAB)["backend"]["nodes"]] == addresses
        endpoints: dict[str, list[int]] = {}  # the docker provider's: 127.0.0.1 and a forwarded port each
        for host in map(SshHost.from_json, read_state(LAB)["backend"]["hosts"]):
            endpoints.setdefault(host.host, []).append(host.port)
        status = run([GREGOR, "lab", "status", "--lab", LAB, "--backend", "ssh"], env, timeout=300)
        assert "active controller: n" in status.stdout  # vagrant status shows them running: reused

        run(["vagrant", "destroy", "-f"], env, timeout=600)  # and no gregor lab down before it
        assert ours(containers, subnet) == []
        with contextlib.ExitStack() as stack:
            to_sshd = [
                stack.enter_context(PacketCounter([address], ports, new_only=True))
                for address, ports in endpoints.items()
            ]
            before = to_nodes.count()
            again = subprocess.run(
                [GREGOR, "run", "--backend", "ssh", "--lab", LAB, "--workload", "queue", "--time-limit", "5"]
                + ["--store", str(tmp_path / "again")],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            assert again.returncode == 2, again.stdout[-2000:] + again.stderr[-2000:]
            refusal = again.stderr.strip()
            assert "\n" not in refusal and "reusing" not in again.stdout, again.stdout + again.stderr
            assert (
                f"lab {LAB!r} is stale, so it is not reused and nothing was sent to its brokers: the Vagrant "
                f"machines n1, n2, n3 in {REPO} are not running (vagrant status: not created); "
                f"run: gregor lab down --lab {LAB} --backend ssh"
            ) in refusal, refusal

            down = run([GREGOR, "lab", "down", "--lab", LAB, "--backend", "ssh", "--vagrant", "."], env, timeout=300)
            lines = down.stdout.strip().splitlines()
            assert len(lines) == 1 and "nothing left to clean" in lines[0] and "NOT cleaned" not in down.stdout, lines
            assert to_nodes.count() == before, "a packet went to the destroyed machines' addresses"
            assert sum(c.count() for c in to_sshd) == 0, f"a packet went to their SSH endpoints {endpoints}"
    assert not state_path(LAB).exists()
    assert not (dotfile / "gregor").exists()
