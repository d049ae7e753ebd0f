"""SIGKILL of `gregor run` while a fault is in force, then `gregor lab down`:
nothing paused, cut or running is left, on every backend."""

import os
import signal
import subprocess
import sys
import time

import pytest
from lab.helpers import leftovers

from ground.errors import GregorError
from ground.procfs import proc_state
from harness.lab import Lab
from nemesis.ledger import Ledger

pytestmark = pytest.mark.lab

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")


def host_rules_naming(lab_name: str) -> list[str]:
    """iptables rules on this host that name the lab (its bridge, its network)."""
    out = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"{lab_name}-br" in line or f"gregor-{lab_name}" in line]


def test_sigkill_mid_fault_then_lab_down_leaves_nothing(lab, tmp_path, lab_keeper):
    name, backend = lab.name, lab.backend.name
    ledger = Ledger.for_lab(name)
    proc = subprocess.Popen(
        [
            GREGOR,
            "run",
            "--workload",
            "zombie",
            "--lab",
            name,
            "--backend",
            backend,
            "--store",
            str(tmp_path),
            "--time-limit",
            "120",
            "--no-check",
            "--client-netns",
            "--concurrency",
            "4",
            "--rate",
            "40",
            "--nemesis",
            "partition,pause,kill",
            "--nemesis-interval",
            "2",
            "--seed",
            "3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:  # a node fault and a paused client at once
            entries = ledger.entries()
            node_fault = any(e.get("nodes") for e in entries)
            client_paused = any(c.get("pid") for e in entries for c in e.get("clients", []))
            if node_fault and client_paused:
                break
            assert proc.poll() is None, "gregor run ended early"
            time.sleep(0.05)
        else:
            pytest.fail("never saw a node fault and a paused client in force together")
        time.sleep(0.3)
        in_force = ledger.entries()
        paused_pids = [c["pid"] for e in in_force for c in e.get("clients", []) if c.get("pid")]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert ledger.entries(), "the crash left faults in the ledger"
    down = subprocess.run(
        [GREGOR, "lab", "down", "--lab", name, "--backend", backend], capture_output=True, text=True, timeout=180
    )
    assert down.returncode == 0, down.stderr
    lab_keeper.current.pop(backend, None)  # the next module brings it up again
    assert leftovers(name, backend) == []
    assert ledger.entries() == []
    assert host_rules_naming(name) == []
    assert all(proc_state(pid) in (None, "Z") for pid in paused_pids), "a paused client survived"
    with pytest.raises(GregorError):
        Lab.attach(name, backend=backend)
