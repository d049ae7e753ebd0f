"""Bad parameters of `gregor run` get one line, exit 2, and nothing starts."""

import os
import subprocess
import sys

import pytest
from backend_params import lab_name

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
LAB = lab_name("wlbad")

CASES = [
    (["--workload", "nosuch"], "unknown workload 'nosuch'"),
    (["--workload", "queue", "--concurrency", "0"], "--concurrency must be at least 1"),
    (["--workload", "queue", "--rate", "fast"], "--rate must be a number"),
    (["--workload", "queue", "--rate", "-5"], "--rate must be a positive number"),
    (["--workload", "queue", "--time-limit", "nan"], "--time-limit must be a positive number"),
    (
        ["--workload", "queue", "--keys", "9", "--topics", "2", "--partitions-per-topic", "4"],
        "--keys 9 needs 9 partitions",
    ),
    (
        ["--workload", "eos", "--keys", "5", "--topics", "1", "--partitions-per-topic", "8"],
        "--keys 5 needs 10 partitions",
    ),
    (["--workload", "eos", "--concurrency", "2"], "eos workload needs at least 3"),
    (["--workload", "queue", "--nodes", "1", "--min-insync-replicas", "2"], "exceeds the replication factor 1"),
    (["--workload", "queue", "--name", "a/b"], "--name 'a/b' may hold only"),
    (["--workload", "queue", "--acks", "1"], "--acks 1 needs --idempotence false"),
    (["--workload", "queue", "--max-in-flight", "6"], "--max-in-flight 6 needs --idempotence false"),
    (["--workload", "queue", "--batch", "x"], "--batch must be a whole number"),
    (["--workload", "queue", "--backend", "vm"], "unknown backend 'vm'; choose one of local, docker"),
    (["--workload", "queue", "--system", "nosuch"], "unknown system 'nosuch'"),
    (["--workload", "txn", "--hang", "inside"], "--hang inside needs --txn-hold-ms above 0"),
]


@pytest.mark.parametrize("argv,message", CASES)
def test_a_bad_parameter_is_one_line_before_anything_starts(tmp_path, argv, message):
    store = tmp_path / "store"
    result = subprocess.run(
        [GREGOR, "run", *argv, "--lab", LAB, "--store", str(store)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gregor: error: ")
    assert message in lines[0]
    assert not store.exists(), "a store directory was made before the parameters were checked"
    assert not os.path.exists(f"/run/gregor/{LAB}.json"), "a lab was started"


class NoFaultBackend:
    """A backend that can inject no node fault (unit test of the check only)."""

    name = "inert"
    faults = frozenset()


def test_a_fault_the_backend_cannot_do_is_refused(monkeypatch):
    from ground.errors import GregorError
    from harness import registry
    from harness.controller.run_cli import check_faults_possible

    monkeypatch.setitem(registry.BACKENDS, "inert", f"{__name__}:NoFaultBackend")
    check_faults_possible("local", ["partition", "pause", "kill", "netem"])
    with pytest.raises(GregorError, match="the inert backend cannot inject kill faults; it can do: none"):
        check_faults_possible("inert", ["kill"])
