"""The relay shipped as one file (harness/wire_nodes.py): the zipapp holds the package and runs as the
relay and as its control client; a node's relay is started, asked and swept through the node's
exec alone. The node here is this host run through subprocess (no lab): a relay that redirects
nothing (--no-redirect would need another start path, so it serves a destination no one dials)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from harness import wire_nodes
from harness.node import ExecNode
from harness.wire.places import ZIPAPP, relays
from harness.wire_relay import brokers_tag


def test_the_zipapp_holds_every_module_of_the_package(tmp_path):
    path = wire_nodes.build(str(tmp_path / ZIPAPP))
    names = set(zipfile.ZipFile(path).namelist())
    modules = {f"wire/{name}" for name in os.listdir(wire_nodes.WIRE_DIR) if name.endswith(".py")}
    assert {"wire/relay.py", "wire/control.py", "wire/places.py", "wire/__main__.py"} <= modules
    assert names == modules | {"__main__.py"}


@pytest.mark.parametrize("command, says", [("relay", "serve"), ("control", "--tag")])
def test_the_zipapp_runs_the_relay_and_its_control_client(tmp_path, command, says):
    path = wire_nodes.build(str(tmp_path / ZIPAPP))
    result = subprocess.run([sys.executable, path, command, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert says in result.stdout
    bare = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=30)
    assert bare.returncode == 2 and "relay,control" in bare.stderr


class HostNode(ExecNode):
    """This host as a node: exec and spawn through subprocess, home in a temporary directory
    (the helpers every node has, such as await_log, are ExecNode's own)."""

    python = sys.executable
    label = "host"

    def __init__(self, name: str, home: str):
        super().__init__(name, "127.0.0.1", home)
        self.children = []

    def exec(self, argv, *, check=True, timeout=30, stdin=None):
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=stdin)
        assert not check or result.returncode == 0, result.stderr
        return result

    def spawn(self, argv, *, log, pid_file, env=None, cwd=None):
        with open(log, "ab") as out:
            child = subprocess.Popen(list(argv), stdout=out, stderr=out, start_new_session=True)
        self.children.append(child)
        return child.pid

    def upload(self, local, remote):
        os.makedirs(os.path.dirname(remote), exist_ok=True)
        with open(local, "rb") as source, open(remote, "wb") as target:
            target.write(source.read())

    def read_text(self, path):
        try:
            return open(path).read()
        except FileNotFoundError:
            return None


@pytest.mark.skipif(os.geteuid() != 0, reason="the relay's REDIRECT rule needs root")
def test_a_node_relay_is_started_asked_and_swept_through_exec(tmp_path):
    node = HostNode("h1", str(tmp_path))
    tag = brokers_tag(f"shiptest{os.getpid()}")
    # 192.0.2.0/24 is TEST-NET-1: no one here dials it, so the rule redirects nothing real
    try:  # swept even when start itself fails after spawning the relay
        ready = wire_nodes.start(node, tag, ["192.0.2.77:9092"])
        assert ready["ready"] and ready["port"] > 0
        assert os.path.exists(tmp_path / "tools" / ZIPAPP)
        assert relays(tag) == [node.children[0].pid]  # found by its tag, run from the zipapp
        added = wire_nodes.ask_all(
            [node], tag, {"op": "add", "rule": {"action": "delay", "delay_ms": 5, "netns": ["h1"]}}
        )
        status = wire_nodes.ask_all([node], tag, {"op": "status"})
        assert (
            status["rules"] == [added["id"]]
            and status["refused"] == 0
            and status["nodes"]["h1"]["port"] == ready["port"]
        )
        removed = wire_nodes.ask_all([node], tag, {"op": "remove", "id": added["id"]})
        assert removed["report"]["matched"] == 0 and removed["report"]["by_node"] == {"h1": 0}
        rules = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
        assert f"gregor-wire:{tag}" in rules
    finally:
        swept = wire_nodes.sweep(node, tag)
        for child in node.children:
            child.wait(timeout=10)
    assert swept["relays"] == 1
    assert relays(tag) == []
    assert (
        f"gregor-wire:{tag}"
        not in subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout
    )
    with pytest.raises(Exception, match="no wire relay answers"):
        wire_nodes.ask(node, tag, {"op": "status"})


def test_a_sweep_where_nothing_was_shipped_finds_nothing(tmp_path):
    assert wire_nodes.sweep(HostNode("h1", str(tmp_path)), "nothing.brokers") == {
        "relays": 0,
        "killed": 0,
        "redirects_removed": 0,
    }


def test_one_rule_on_several_nodes_reports_as_one():
    reports = {
        "n1": {"id": "w1", "rule": {}, "matched": 2, "events": [{"t": 3.0}, {"t": 1.0}], "events_dropped": 0},
        "n2": {"id": "w1", "rule": {}, "matched": 1, "events": [{"t": 2.0}], "events_dropped": 1},
    }
    merged = wire_nodes.merged_report(reports)
    assert merged["matched"] == 3 and merged["events_dropped"] == 1
    assert [event["t"] for event in merged["events"]] == [1.0, 2.0, 3.0]
    assert merged["by_node"] == {"n1": 2, "n2": 1}
    assert json.dumps(merged)
