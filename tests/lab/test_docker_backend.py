"""The Docker backend beside the local one, and its one-line errors.

The nemesis and workload properties are shown on Docker by the parametrised
tests in tests/nemesis and tests/workloads; this module covers what only
the Docker backend has: its engine, its image, and living next to a local lab.
Last, the two labs are made stale behind Gregor's back (a namespace deleted,
a container killed), which costs no lab of its own: a stale lab is refused
with not one packet to its brokers, and `lab down` still cleans it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from backend_params import lab_name
from packet_counter import PacketCounter

from harness.backends import docker_engine, docker_image
from harness.cli import main
from harness.lab import Lab
from lab.helpers import consume_all, leftovers, needs_root, produce

pytestmark = [pytest.mark.lab, needs_root]
GREGOR = str(Path(sys.executable).with_name("gregor"))


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gregor: error: ") and "\n" not in err, err
    return err


def forward_policy() -> str:
    return subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True).stdout.splitlines()[0]


@pytest.fixture(scope="module")
def both():
    """A local lab and a Docker lab, up at the same time."""
    local, docker = lab_name("coexl"), lab_name("coexd")
    Lab.down(local, progress=None, backend="local")
    Lab.down(docker, progress=None, backend="docker")
    labs = []
    try:
        labs.append(Lab.up(nodes=3, name=local, backend="local", progress=None))
        labs.append(Lab.up(nodes=3, name=docker, backend="docker", progress=None))
        yield labs
    finally:
        Lab.down(local, progress=None, backend="local")
        Lab.down(docker, progress=None, backend="docker")
        assert leftovers(local, "local") == [] and leftovers(docker, "docker") == []


def test_a_local_and_a_docker_lab_serve_side_by_side(both):
    for lab in both:
        lab.wait_healthy(timeout=60)
        topic = f"side-{lab.backend.name}"
        lab.admin().create_topic(topic, partitions=1, replication_factor=3)
        lab.wait_healthy([topic], timeout=60)
        values = [f"{lab.backend.name}-{i}" for i in range(200)]
        assert produce(lab.bootstrap_servers, topic, values) == values
        assert consume_all(lab.bootstrap_servers, topic, 200) == values
    local, docker = both
    assert {n.address for n in local.nodes}.isdisjoint(n.address for n in docker.nodes)
    assert docker.describe()["backend"] == "docker" and local.describe()["backend"] == "local"


def test_a_forward_policy_of_drop_does_not_cut_the_local_lab(both):
    """What a Docker engine that turned forwarding on itself does (moby#28257):
    the local lab's own ACCEPT rule keeps its bridged nodes talking."""
    local, docker = both
    before = forward_policy()
    subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True)
    try:
        for lab in both:
            lab.admin().create_topic(f"drop-{lab.backend.name}", partitions=3, replication_factor=3)
            lab.wait_healthy([f"drop-{lab.backend.name}"], timeout=60)
    finally:
        subprocess.run(["iptables", "-P", "FORWARD", before.split()[-1]], check=True)


# The group the stale-lab test runs its gregor commands as, and counts the packets of:
# the clients earlier tests left in this process may reconnect at any time.
COUNTED_GID = 54321


def gregor(*argv: str, gid: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([GREGOR, *argv], capture_output=True, text=True, timeout=300, group=gid)


def take_a_node_away(lab) -> str:
    """What a reboot, a cleanup script or a person does behind Gregor's back:
    n2's namespace deleted (its broker still runs in it, still answering at
    its address) or n2's container killed. n1 and n3 serve on."""
    if lab.backend.name == "local":
        subprocess.run(["ip", "netns", "del", f"{lab.name}-n2"], check=True)
        return f"namespaces gone: {lab.name}-n2"
    docker_engine.client().containers.get(f"gregor-{lab.name}-n2").kill()
    return f"containers not running: gregor-{lab.name}-n2 (exited)"


@pytest.mark.parametrize("which", ["local", "docker"])
def test_a_stale_lab_is_refused_and_taken_down_without_a_packet_to_its_brokers(both, which, tmp_path):
    """The last test of `both`: it takes a node of each lab away."""
    lab = next(lab for lab in both if lab.backend.name == which)
    addresses = [node.address for node in lab.nodes]
    ports = sorted({port for node in lab.nodes for port in node.service.ports})  # 9092, 9093
    # new connections of the gregor commands only: any packet of a new process
    # begins one, and what this test process may still hold or reopen is not counted
    with PacketCounter(addresses, ports, new_only=True, gid=COUNTED_GID) as sent:
        healthy = gregor("lab", "status", "--lab", lab.name, gid=COUNTED_GID)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert sent.count() > 0  # the counter sees a command's requests to the brokers
        before = sent.count()
        why = take_a_node_away(lab)

        argv = f"run --lab {lab.name} --workload queue --time-limit 5".split()
        run = gregor(*argv, "--store", str(tmp_path), gid=COUNTED_GID)
        assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
        refusal = run.stderr.strip()
        assert "\n" not in refusal and f"lab {lab.name!r} is stale" in refusal and why in refusal, refusal
        assert "reusing" not in run.stdout and not (tmp_path / "latest").exists()

        status = gregor("lab", "status", "--lab", lab.name, gid=COUNTED_GID)
        assert status.returncode == 1 and f"STALE: {why}" in status.stdout, status.stdout + status.stderr
        assert sent.count() == before, "a packet went to the brokers of a stale lab"

        named = shlex.split(refusal.rpartition("run: ")[2])[1:]  # the command the refusal names
        down = gregor(*named, gid=COUNTED_GID)
        assert down.returncode == 0, down.stderr
        assert f"lab {lab.name}: its machines were gone: {why}; removed what was left here" in down.stdout
        assert sent.count() == before, "lab down sent a packet to the brokers of a stale lab"
    assert leftovers(lab.name, which) == []


def test_the_node_image_is_cached_by_its_recipe():
    client = docker_engine.client(progress=lambda _m: None)
    tag = docker_image.ensure_image(client, progress=lambda m: pytest.fail(f"rebuilt: {m}"))
    assert tag == docker_image.image_tag() and tag.startswith("gregor-node:")
    assert client.images.get(tag).attrs["Config"]["Labels"]["gregor.recipe"] == tag.split(":")[1]


def test_docker_not_installed_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker_engine, "SOCKET", str(tmp_path / "no-engine.sock"))
    monkeypatch.setenv("PATH", str(tmp_path))
    err = one_line_error(capsys, ["lab", "up", "--backend", "docker", "--lab", lab_name("dkno")])
    assert "Docker is not installed" in err and "docker.io" in err


def test_dockerd_that_cannot_start_says_why(capsys, monkeypatch, tmp_path):
    """A dockerd that fails as a broken engine does (a stand-in script on PATH)."""
    fake = tmp_path / "dockerd"
    fake.write_text(
        '#!/bin/sh\necho \'time="x" level=fatal msg="failed to start daemon: no space left on device"\'\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker_engine, "SOCKET", str(tmp_path / "no-engine.sock"))
    monkeypatch.setattr(docker_engine, "PIDFILE", tmp_path / "docker.pid")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("GREGOR_STATE_DIR", str(tmp_path / "state"))
    assert main(["lab", "up", "--backend", "docker", "--lab", lab_name("dkno")]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == (
        "gregor: error: dockerd could not start: failed to start daemon: no space left on "
        f"device (log {tmp_path / 'state' / 'dockerd.log'})"
    )
    assert (
        out.strip()
        == f"docker: no engine running; starting dockerd (it keeps running; log {tmp_path / 'state' / 'dockerd.log'})"
    )


def test_a_stale_pid_file_does_not_stop_dockerd(tmp_path):
    """A pid file left by a dockerd that is gone, its pid now another process's (here: ours)."""
    pidfile = tmp_path / "docker.pid"
    pidfile.write_text(str(os.getpid()))
    docker_engine.clear_stale_pidfile(pidfile)
    assert not pidfile.exists()
    pidfile.write_text("not a pid")
    docker_engine.clear_stale_pidfile(pidfile)
    assert not pidfile.exists()
    docker_engine.clear_stale_pidfile(pidfile)  # none at all: nothing to do


def test_an_engine_that_does_not_answer_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    err = one_line_error(capsys, ["lab", "up", "--backend", "docker", "--lab", lab_name("dkno")])
    assert "no Docker engine answers at DOCKER_HOST" in err
