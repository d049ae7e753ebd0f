"""Target resolution and fault recording, with a stand-in cluster.

Unit tests of targets.py and faults.py only: the cluster's role answers and
the node calls are scripted so the logic (which role, which node, ledger
before fault, invoke then info) can be checked exactly. The real thing is in
test_lab_processes.py and test_lab_partitions.py.
"""

import random
import time
from dataclasses import dataclass

import pytest

from ground.errors import GregorError
from ground.protocols import RoleUnavailable
from nemesis import targets
from nemesis.faults import Nemesis
from nemesis.heal import heal_entry
from nemesis.ledger import Ledger
from nemesis.runner import NemesisRunner
from nemesis.schedule import Step
from nemesis.targets import TargetResolver, TargetUnavailable, parse_target


@dataclass(frozen=True)
class Client:
    process: int
    pid: int
    role: str
    txn_id: str | None = None
    group: str | None = None
    place: str | None = None
    busy_s: float | None = None
    window_s: float | None = None


class ScriptedRoles:
    """What a cluster's Roles would answer: node names, or RoleUnavailable."""

    def __init__(self):
        self.leaders = {("t0", 0): "n2", ("t0", 1): "n3"}

    def leader(self, topic, partition):
        found = self.leaders[(topic, partition)]
        if found is None:
            raise RoleUnavailable(f"the cluster reports no leader of {topic}-{partition} right now")
        return found

    def controller(self):
        return "n1"

    def txn_coordinator(self, txn_id):
        return {"tx-a": "n3"}.get(txn_id, "n2")

    def group_coordinator(self, group):
        return "n1"


class RecordingNode:
    def __init__(self, name, broker_id, log, ledger):
        self.name, self.address = name, f"10.9.0.{10 + broker_id}"
        self._log, self._ledger, self._state = log, ledger, "running"

    def _call(self, what, *args):
        self._log.append((what, self.name, *args, len(self._ledger.entries())))

    def drop_from(self, ips):
        self._call("drop_from", tuple(ips))

    def drop_to(self, ips):
        self._call("drop_to", tuple(ips))

    def heal_network(self):
        self._call("heal_network")

    def kill(self):
        self._call("kill")
        self._state = "dead"

    def start(self):
        self._call("start")
        self._state = "running"

    def pause(self):
        self._call("pause")
        self._state = "paused"

    def resume(self):
        self._call("resume")
        self._state = "running"

    def state(self):
        return self._state

    def netem(self, spec):
        self._call("netem", spec)
        return "tc netem qdisc"

    def clear_netem(self):
        self._call("clear_netem")


class Ctx:
    def __init__(self, lab, clients=()):
        self.lab, self.events, self._clients = lab, [], list(clients)
        self.test = {"keys": {"0": ["t0", 0], "1": ["t0", 1]}}

    def record(self, event):
        event = dict(event, index=len(self.events), time=len(self.events))
        self.events.append(event)
        return event

    def clients(self):
        return self._clients

    def txn_ids(self):
        return ["tx-a"]

    def group_ids(self):
        return []


class Lab:
    name = "unit"

    def __init__(self, ledger):
        self.log = []
        self.nodes = [RecordingNode(f"n{i}", i, self.log, ledger) for i in (1, 2, 3)]
        self.scripted = ScriptedRoles()

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def roles(self):
        return self.scripted

    def heal_all(self):
        self.log.append(("heal_all",))

    def heal_in_run(self):
        self.log.append(("heal_in_run",))
        return {"clients": 0, "brokers": 0}

    def start_node(self, name):
        self.node(name).start()


@pytest.fixture
def world(tmp_path):
    ledger = Ledger(tmp_path / "faults.json")
    lab = Lab(ledger)
    ctx = Ctx(lab, [Client(1, 4242, "txn", txn_id="tx-b", group="g1")])
    return lab, ctx, ledger


def resolver(world, seed=0):
    lab, ctx, _ = world
    return TargetResolver(lab, ctx, random.Random(seed))


def test_roles_come_from_the_clusters_answers(world):
    r = resolver(world)
    assert r.resolve("leader:0").nodes == ("n2",)
    assert r.resolve("leader:1").nodes == ("n3",) and r.resolve("leader:1").role == "leader:1"
    assert r.resolve("controller").nodes == ("n1",)
    assert r.resolve("txn:tx-a").nodes == ("n3",)
    assert r.resolve("group:g1").role == "group-coordinator:g1"
    coordinators = {r.resolve("coordinator").role for _ in range(40)}
    assert coordinators == {"txn-coordinator:tx-a", "txn-coordinator:tx-b", "group-coordinator:g1"}


def test_group_sizes_and_unknown_names(world):
    r = resolver(world)
    assert len(r.resolve("minority").nodes) == 1
    assert len(r.resolve("majority").nodes) == 2
    assert r.resolve("all").nodes == ("n1", "n2", "n3")
    with pytest.raises(GregorError, match="key 7 is not in the run's key map"):
        r.resolve("leader:7")
    with pytest.raises(GregorError, match="no node 'n9'"):
        r.resolve("node:n9")


def test_missing_roles_are_unavailable_not_guessed(world):
    r = resolver(world)
    world[0].scripted.leaders[("t0", 0)] = None  # election in progress
    with pytest.raises(TargetUnavailable, match="no leader of t0-0"):
        r.resolve("leader:0")
    with pytest.raises(TargetUnavailable, match="place of its own"):
        r.resolve("client", need_place=True)


def test_kill_writes_the_ledger_before_killing_and_records_invoke_then_info(world):
    lab, ctx, ledger = world
    nem = Nemesis(ctx, ledger, random.Random(1))
    entry = nem.start(Step("kill", "leader:1", 1, 1))
    assert lab.log == [("kill", "n3", 1)]  # one ledger entry when kill ran
    assert [(e["type"], e["f"]) for e in ctx.events] == [("invoke", "kill"), ("info", "kill")]
    assert ctx.events[1]["value"]["killed"] == ["n3"] and ctx.events[1]["value"]["role"] == "leader:1"
    assert ctx.events[1]["value"]["nodes"] == ["n3"] and ctx.events[0]["value"]["nodes"] == []
    nem.stop(entry)
    assert lab.log[-1] == ("start", "n3", 1) and ledger.entries() == []
    assert [(e["type"], e["f"]) for e in ctx.events[2:]] == [("invoke", "start"), ("info", "start")]


def test_isolating_the_controller_drops_both_ways(world):
    lab, ctx, ledger = world
    nem = Nemesis(ctx, ledger, random.Random(1))
    entry = nem.start(Step("partition", "controller", 1, 1, shape="isolate"))
    assert ctx.events[-1]["value"]["isolated"] == [["n1"], ["n2", "n3"]]
    drops = sorted(c[:3] for c in lab.log)
    assert drops == [
        ("drop_from", "n1", ("10.9.0.12", "10.9.0.13")),
        ("drop_from", "n2", ("10.9.0.11",)),
        ("drop_from", "n3", ("10.9.0.11",)),
    ]
    nem.stop(entry)
    assert sorted(c[1] for c in lab.log if c[0] == "heal_network") == ["n1", "n2", "n3"]


def test_unavailable_role_is_recorded_as_skipped(world):
    lab, ctx, ledger = world
    lab.scripted.leaders[("t0", 1)] = None
    nem = Nemesis(ctx, ledger, random.Random(1))
    assert nem.start(Step("pause", "leader:1", 1, 1)) is None
    assert ctx.events[-1]["type"] == "info" and "skipped" in ctx.events[-1]["value"]
    assert lab.log == [] and ledger.entries() == []


def test_heal_of_a_dead_client_pid_does_nothing(world):
    lab, _, _ = world
    value = heal_entry(lab, {"fault": "pause", "nodes": [], "clients": [{"pid": 2**22 + 7, "starttime": 1}]})
    assert value == {"resumed": [], "resumed_clients": []}


def test_runner_heals_what_is_in_force_when_stopped_and_stop_is_idempotent(world, monkeypatch, tmp_path):
    monkeypatch.setenv("GREGOR_STATE_DIR", str(tmp_path))
    lab, ctx, _ = world
    runner = NemesisRunner(ctx, faults=["kill"], interval_s=0.02, targets=["node:n2"], seed=1)
    runner.start()
    deadline = time.monotonic() + 10
    while not any(e["f"] == "kill" and e["type"] == "info" for e in ctx.events):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    runner.stop()
    runner.stop()
    kills = [e for e in ctx.events if e["f"] == "kill" and e["type"] == "info"]
    starts = [e for e in ctx.events if e["f"] == "start" and e["type"] == "info"]
    assert len(kills) == len(starts) >= 1
    assert ctx.events[-1]["f"] == "start" and lab.node("n2").state() == "running"
    assert runner.schedule_summary()["counts"]["kill"] == len(kills)
    assert not (tmp_path / "unit-faults.json").exists()


def test_a_heal_that_fails_mid_run_heals_the_nodes_and_the_client_but_keeps_the_runs_relays_and_places(
    world, monkeypatch, tmp_path
):
    """heal_all would end the wire relays and remove the client places the run's clients still use."""
    monkeypatch.setenv("GREGOR_STATE_DIR", str(tmp_path))
    lab, ctx, _ = world
    runner = NemesisRunner(ctx, faults=["pause"], interval_s=0.02, targets=["node:n2"], seed=1)
    ledger = runner._ledger

    class Failing:
        def stop(self, entry):
            raise GregorError("the heal failed")

    resumed = []
    monkeypatch.setattr(runner, "nemesis", lambda: Failing())
    monkeypatch.setattr("nemesis.pause.resume_client", lambda client: resumed.append(client["pid"]) or True)
    entry = {"id": "e1", "fault": "pause", "nodes": [], "clients": [{"process": 1, "pid": 4242, "starttime": 9}]}
    ledger.add(entry)
    runner._active[entry["id"]] = entry
    runner._heal(entry)
    assert ("heal_in_run",) in lab.log and ("heal_all",) not in lab.log
    assert resumed == [4242]
    assert ledger.entries() == [] and runner._active == {}


def test_a_busy_client_target_takes_only_a_client_working_on_what_it_polled(world, monkeypatch):
    lab, ctx, _ = world
    ctx._clients = [
        Client(1, 11, "member"),
        Client(2, 12, "member", busy_s=0.05),
        Client(3, 13, "member", busy_s=0.4),
        Client(4, 14, "producer", busy_s=0.9),
    ]
    r = resolver(world)
    assert {r.resolve("client:member:busy").clients[0].process for _ in range(20)} == {3}
    assert {r.resolve("client:member").clients[0].process for _ in range(40)} == {1, 2, 3}
    monkeypatch.setattr(targets, "BUSY_WAIT_S", 0.1)
    ctx._clients = ctx._clients[:2]
    started = time.monotonic()
    r.wait_for("client:member:busy")  # before the invoke, so the op stays short
    assert time.monotonic() - started >= 0.1
    monkeypatch.setattr(targets, "BUSY_WAIT_S", 5.0)
    started = time.monotonic()
    r.wait_for("client:member")  # nothing to wait for: well under the 5 s a wait would take
    assert time.monotonic() - started < 2.0
    monkeypatch.setattr(targets, "BUSY_WAIT_S", 0.1)
    with pytest.raises(TargetUnavailable, match="busy for 0.1 s"):
        r.resolve("client:member:busy")
    assert parse_target("client:member:busy") == "client:member:busy"
    with pytest.raises(GregorError, match="the states after 'client:ROLE:' are busy and window"):
        parse_target("client:member:idle")


def test_a_window_target_takes_only_a_copier_between_its_two_commits(world, monkeypatch):
    lab, ctx, _ = world
    ctx._clients = [
        Client(2, 12, "copier"),
        Client(3, 13, "copier", window_s=0.0),
        Client(4, 14, "copier", busy_s=0.5),
        Client(5, 15, "feeder", window_s=0.3),
    ]
    r = resolver(world)
    assert {r.resolve("client:copier:window").clients[0].process for _ in range(20)} == {3}
    assert parse_target("client:copier:window") == "client:copier:window"
    monkeypatch.setattr(targets, "BUSY_WAIT_S", 0.1)
    ctx._clients = [Client(2, 12, "copier"), Client(5, 15, "feeder", window_s=0.3)]
    started = time.monotonic()
    r.wait_for("client:copier:window")  # waits for a copier to enter its window
    assert time.monotonic() - started >= 0.1
    with pytest.raises(TargetUnavailable, match="copier' inside its window"):
        r.resolve("client:copier:window")
