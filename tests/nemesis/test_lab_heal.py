"""Always healed: after SIGTERM the runner heals before exiting, and after a
SIGKILL of the harness the ledger lets heal_leftovers undo what was left."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nemesis_lab_helpers import all_pairs, udp_reachability
from polling import wait_until

from ground.procfs import proc_state as process_state
from nemesis.heal import heal_leftovers
from nemesis.ledger import Ledger

pytestmark = pytest.mark.lab

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

HARNESS = """
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from harness.lab import Lab
from nemesis.runner import NemesisRunner
from nemesis_lab_helpers import ClientInfo, ListContext
lab = Lab.attach(sys.argv[3])
clients = [ClientInfo(process=0, pid=int(sys.argv[6]), role="producer")] if sys.argv[6] != "-" else []
ctx = ListContext(lab, clients=clients)
runner = NemesisRunner(ctx, faults=[sys.argv[4]], interval_s=3.0, targets=[sys.argv[5]], seed=3,
                       hold_s=300.0)   # held until the test ends it, however slow the machine
runner.start()
try:
    time.sleep(300)
finally:
    runner.stop()
    print(json.dumps(ctx.events), flush=True)
"""


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_harness_left(lab):
    """A test that fails half-way still ends its harness and heals what it left,
    so the next test (and the next backend's) starts on a healthy lab."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    heal_leftovers(lab)


def wait_for(condition, what: str, timeout: float = 30) -> None:
    """Faults take effect a moment after their ledger entry (longer on a busy machine)."""
    assert wait_until(condition, timeout), f"{what} within {timeout:.0f} s"


def start_harness(lab, fault, target, client_pid=None):
    """A separate harness process running a nemesis; returns it once the
    ledger shows a fault in force."""
    ledger = Ledger.for_lab(lab.name)
    assert ledger.entries() == [], "a previous test left faults behind"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HARNESS,
            str(ROOT),
            str(HERE),
            lab.name,
            fault,
            target,
            str(client_pid) if client_pid else "-",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    _STARTED.append(proc)
    deadline = time.monotonic() + 30
    while not ledger.entries():
        assert proc.poll() is None, "the harness exited early"
        assert time.monotonic() < deadline, "no fault was applied within 30 s"
        time.sleep(0.02)
    time.sleep(0.5)  # the entry is written just before the fault; let it land
    return proc, ledger


def crash(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_client_paused_by_a_crashed_harness_is_resumed_by_heal_leftovers(lab):
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        proc, ledger = start_harness(lab, "pause", "client", sleeper.pid)
        wait_for(lambda: process_state(sleeper.pid) == "T", "the client was not paused")
        crash(proc)
        time.sleep(0.5)
        assert process_state(sleeper.pid) == "T"  # nobody resumed it
        healed = heal_leftovers(lab)
        assert [e["fault"] for e in healed] == ["pause"]
        assert process_state(sleeper.pid) == "S"
        assert ledger.entries() == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_broker_killed_by_a_crashed_harness_is_restarted_by_heal_leftovers(lab):
    proc, ledger = start_harness(lab, "kill", "node:n3")
    wait_for(lambda: lab.node("n3").state() == "dead", "n3 was not killed")
    crash(proc)
    assert lab.node("n3").state() == "dead"
    heal_leftovers(lab)
    assert lab.node("n3").state() == "running"
    assert ledger.entries() == []
    lab.wait_healthy(timeout=90)


def test_sigterm_heals_the_partition_and_records_the_heal_before_exit(lab):
    proc, ledger = start_harness(lab, "partition", "node:n1")
    wait_for(lambda: udp_reachability(lab) != all_pairs(lab), "the partition did not cut n1")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    events = json.loads(out)
    assert [e["f"] for e in events[-2:]] == ["stop-partition", "stop-partition"]
    assert events[-1]["type"] == "info" and events[-1]["value"]["healed"]
    assert ledger.entries() == []
    assert udp_reachability(lab) == all_pairs(lab)
