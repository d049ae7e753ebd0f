"""lab up / status / down through the CLI, and teardown after Ctrl-C or a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from backend_params import lab_name

from ground.paths import labs_dir
from harness.backends import netns
from harness.cli import main
from harness.lab import Lab, read_state, state_path
from lab.helpers import leftovers, needs_root

pytestmark = [pytest.mark.lab, needs_root]
GREGOR = str(Path(sys.executable).with_name("gregor"))


@pytest.mark.parametrize("version", ["3.8.1", "4.3.1"])
def test_cli_round_trip_leaves_nothing_behind(capsys, version):
    name = lab_name("labc")
    Lab.down(name, progress=lambda _m: None)
    try:
        assert main(["lab", "up", "--lab", name, "--version", version, "--broker-config", "log.retention.ms=-1"]) == 0
        out = capsys.readouterr().out
        assert "lab up took" in out and "3 in-sync replicas" in out
        assert "log.retention.ms=-1" in (labs_dir() / name / "n1" / "server.properties").read_text()
        assert main(["lab", "status", "--lab", name]) == 0
        status = capsys.readouterr().out
        assert f"kafka {version} on local" in status and "active controller: n" in status
        assert "INFO" in (labs_dir() / name / "n1" / "broker.log").read_text()  # the logging binding works
        assert "gregor-health/0: leader" in status
        assert status.count("running") == 3
        assert main(["lab", "status", "--lab", name, "--json"]) == 0
        as_json = json.loads(capsys.readouterr().out)
        assert as_json["controller"] in ("n1", "n2", "n3") and len(as_json["nodes"]) == 3
    finally:
        assert main(["lab", "down", "--lab", name]) == 0
    assert leftovers(name) == []
    assert main(["lab", "down", "--lab", name]) == 0  # idempotent
    assert "nothing to remove" in capsys.readouterr().out


def lab_up_until(name: str, reached, timeout: float) -> subprocess.Popen:
    """`gregor lab up` of a new 2-node lab `name`, once `reached()` holds (or `timeout` passed)."""
    Lab.down(name, progress=lambda _m: None)
    proc = subprocess.Popen(
        [GREGOR, "lab", "up", "--lab", name, "--nodes", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + timeout
    while not reached() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def test_ctrl_c_during_lab_up_leaves_nothing_behind():
    name = lab_name("labi")
    proc = lab_up_until(name, lambda: f"{name}-n2" in netns.namespaces(), timeout=30)
    try:
        assert f"{name}-n2" in netns.namespaces(), "lab up never got as far as creating namespaces"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
    finally:
        if proc.poll() is None:
            proc.kill()
    assert leftovers(name) == []
    Lab.down(name, progress=lambda _m: None)


def test_down_cleans_a_lab_whose_state_file_is_gone():
    name = lab_name("labk")
    Lab.down(name, progress=lambda _m: None)
    up = subprocess.run([GREGOR, "lab", "up", "--lab", name, "--nodes", "1"], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    state_path(name).unlink()  # as if the controller crashed before it could record anything
    assert leftovers(name), "the lab should be running"
    Lab.down(name, progress=lambda _m: None)
    assert leftovers(name) == []


def test_a_lab_whose_up_was_killed_is_refused_in_one_line_then_taken_down(tmp_path):
    """SIGKILL, which `Lab.up` cannot catch, leaves a state file it never finished: a run
    and lab status refuse it in one line (never a stack trace), and lab down clears it."""
    name = lab_name("labh")
    # provisioned: its nodes are being deployed or started now
    proc = lab_up_until(name, lambda: (read_state(name) or {}).get("backend", {}).get("nodes"), timeout=60)
    try:
        proc.kill()
        proc.communicate(timeout=30)
        state = read_state(name)
        assert state and state["backend"].get("nodes"), "lab up never got as far as provisioning its nodes"
        assert state["up_seconds"] is None, "lab up finished before it could be killed"
        assert leftovers(name), "the killed lab up left nothing to clean"

        for argv in (
            ["run", "--lab", name, "--workload", "queue", "--time-limit", "5", "--store", str(tmp_path)],
            ["lab", "status", "--lab", name],
        ):
            refused = subprocess.run([GREGOR, *argv], capture_output=True, text=True, timeout=120)
            refusal = refused.stderr.strip()
            assert refused.returncode == 2 and "\n" not in refusal, refused.stdout + refused.stderr
            assert f"lab {name!r} is stale" in refusal and "its setup never finished" in refusal, refusal
            assert f"run: gregor lab down --lab {name}" in refusal, refusal
        assert not list(tmp_path.iterdir()), "the refused run wrote a run directory"
    finally:
        if proc.poll() is None:
            proc.kill()
        down = subprocess.run([GREGOR, "lab", "down", "--lab", name], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and f"lab {name}: down" in down.stdout, down.stdout + down.stderr
    assert leftovers(name) == []
    assert read_state(name) is None
