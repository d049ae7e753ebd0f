"""After a power cut's heal the schedule waits for the brokers to serve:
`power.serving` asks each node's client address (here a real loopback
socket behind a stand-in lab), and the room a power cut needs includes the
brokers' restart."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

from nemesis import power
from nemesis.runner import NemesisRunner
from nemesis.schedule import Step


def _lab(port: int):
    nodes = {"n1": SimpleNamespace(name="n1")}
    system = SimpleNamespace(bootstrap_servers=lambda chosen: ",".join(f"127.0.0.1:{port}" for _ in chosen))
    return SimpleNamespace(node=nodes.__getitem__, system=system)


def test_a_node_serves_when_its_client_address_accepts_connections():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        assert power.serving(_lab(port), ["n1"])
    finally:
        listener.close()
    assert not power.serving(_lab(port), ["n1"])


def test_a_power_cut_needs_room_for_the_brokers_restart(monkeypatch, tmp_path):
    monkeypatch.setenv("GREGOR_STATE_DIR", str(tmp_path))
    ctx = SimpleNamespace(lab=SimpleNamespace(name="unit"))
    runner = NemesisRunner(
        ctx,
        faults=["power-loss", "kill"],
        interval_s=8,
        tail_s=8,
        deadline=time.monotonic() + 8 + 10 + power.RESTART_S / 2,
    )
    assert runner.room_for(Step("kill", "node:n1", quiet_s=0, hold_s=8))
    assert not runner.room_for(Step("power-loss", "all", quiet_s=0, hold_s=8))
