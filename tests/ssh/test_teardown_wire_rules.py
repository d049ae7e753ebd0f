"""The SSH backend's teardown and leftovers scripts on the brokers' wire relay rules (docs/WIRE.md,
"On docker and ssh"): run here in a network namespace of their own, as root, on real iptables; no
SSH host needed. A lab's rules go, another lab's whose name starts the same stay."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from harness.backends.ssh import _LEFTOVERS, _TEARDOWN

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace, iptables)")


@pytest.fixture
def namespace():
    name = f"gtw-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield ["ip", "netns", "exec", name]
    subprocess.run(["ip", "netns", "del", name], check=True)


def add_rule(inside: list[str], tag: str) -> None:
    subprocess.run(
        [*inside, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "--dport", "9092"]
        + ["-m", "comment", "--comment", f"gregor-wire:{tag}", "-j", "REDIRECT", "--to-ports", "4000"],
        check=True,
    )


def run(inside: list[str], script: str, root: str, lab: str) -> str:
    return subprocess.run([*inside, "sh", "-c", script, "sh", root, lab], capture_output=True, text=True).stdout


def test_the_teardown_removes_the_labs_wire_rules_and_only_those(namespace, tmp_path):
    root = str(tmp_path / "labs")
    os.makedirs(f"{root}/wl/n1")
    add_rule(namespace, "wl.brokers")
    add_rule(namespace, "wlx.brokers")
    assert "wire relay rules" in run(namespace, _LEFTOVERS, root, "wl")
    assert "1 wire relay rules removed" in run(namespace, _TEARDOWN, root, "wl")
    left = subprocess.run([*namespace, "iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    assert "gregor-wire:wl.brokers" not in left and "gregor-wire:wlx.brokers" in left
    assert "wire relay rules" not in run(namespace, _LEFTOVERS, root, "wl")
