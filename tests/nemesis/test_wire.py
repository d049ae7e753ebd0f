"""The wire fault's own logic, no lab: its rule syntax, the plan's draw of rules, and the
start/heal pair against a stand-in for the lab's relay (the real relay: tests/wire, tests/lab)."""

from __future__ import annotations

import pytest

from ground.errors import GregorError
from ground.faults import WIRE, kind
from nemesis import wire
from nemesis.ledger import Ledger
from nemesis.schedule import DEFAULT_TARGETS, plan, wire_broker_sources, wire_client_sources
from nemesis.targets import Target, TargetUnavailable
from workloads.context import ClientInfo


@pytest.mark.parametrize(
    "text, rule",
    [
        ("delay:api=EndTxn:ms=3000:count=1", {"action": "delay", "api": "EndTxn", "delay_ms": 3000, "count": 1}),
        ("delay:ms=50:on=response", {"action": "delay", "delay_ms": 50, "on": "response"}),
        ("hold:api=26:ms=20000", {"action": "hold", "api": "26", "delay_ms": 20000}),
        (
            "drop-response:api=Produce:txn=tx-1",
            {"action": "drop_response", "api": "Produce", "transactional_id": "tx-1"},
        ),
        (
            "duplicate:producer=7:after=100:for=2000",
            {"action": "duplicate", "producer_id": 7, "after_ms": 100, "for_ms": 2000},
        ),
        ("duplicate:dest=10.1.2.11:9092:count=2", {"action": "duplicate", "dest": "10.1.2.11:9092", "count": 2}),
    ],
)
def test_a_rule_as_written_becomes_the_relays_fields(text, rule):
    assert wire.parse_rule(text) == rule


@pytest.mark.parametrize(
    "text, says",
    [
        ("slow:ms=5", "begins with one of delay, hold, drop-response, duplicate"),
        ("delay:api=EndTxn", "delay needs ms=MILLISECONDS"),
        ("duplicate:ms=5", "ms is for delay and hold only"),
        ("delay:ms=fast", "ms takes a whole number"),
        ("delay:ms=5:colour=red", "unknown field 'colour'"),
        ("delay:ms=5:ms=6", "ms is given twice"),
        ("delay:ms=5:api=", "api is empty"),
    ],
)
def test_a_bad_rule_is_one_line(text, says):
    with pytest.raises(GregorError) as error:
        wire.parse_rule(text)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_the_plan_draws_wire_rules_for_the_targets_named_and_needs_one():
    steps = plan([WIRE], ["leader", "client"], 1, 5.0, wire_rules=["delay:ms=5", "duplicate:api=EndTxn"])
    drawn = [next(steps) for _ in range(40)]
    assert {step.target for step in drawn} == {"leader", "client"}  # a node target: broker sources
    assert {step.rule for step in drawn} == {"delay:ms=5", "duplicate:api=EndTxn"}
    assert drawn[0].intent()["rule"] == drawn[0].rule
    with pytest.raises(GregorError, match="--nemesis wire needs a rule"):
        next(plan([WIRE], ["client"], 1, 5.0))


def test_with_the_default_targets_or_no_relay_on_the_nodes_wire_rules_aim_at_clients_only():
    steps = plan([WIRE], DEFAULT_TARGETS, 1, 5.0, wire_rules=["delay:ms=5"])
    drawn = [next(steps) for _ in range(40)]
    assert {step.target for step in drawn} == {"client"}
    steps = plan([WIRE], ["leader", "client"], 1, 5.0, node_faults=frozenset({"partition"}), wire_rules=["delay:ms=5"])
    assert {next(steps).target for _ in range(40)} == {"client"}
    assert wire_broker_sources(["coordinator"]) and not wire_client_sources(["coordinator"])
    assert wire_client_sources(None) and not wire_broker_sources(None) and not wire_broker_sources(DEFAULT_TARGETS)
    assert wire_broker_sources(["all", "client"]) and wire_client_sources(["all", "client"])


def test_other_faults_plans_are_unchanged_by_the_wire_draw():
    before = plan(["partition", "kill"], ["one", "client"], 3, 5.0)
    after = plan(["partition", "kill"], ["one", "client"], 3, 5.0, wire_rules=["delay:ms=5"])
    assert [next(before) for _ in range(20)] == [next(after) for _ in range(20)]


class Relay:
    """Stands in for the lab's relay: its control answers as docs/WIRE.md says."""

    def __init__(self):
        self.rules: dict[str, dict] = {}
        self.gone = False
        self.asked: list[bool] = []  # per call: the brokers' relay (True) or the clients' (False)

    def wire_call(self, request: dict, brokers: bool = False) -> dict:
        self.asked.append(brokers)
        if self.gone:
            raise GregorError("wire relay of lab t: no wire relay answers on /tmp/gregor-wire-t.sock")
        if request["op"] == "add":
            self.rules[request["rule"]["id"]] = request["rule"]
            return {"ok": True, "id": request["rule"]["id"]}
        spec = self.rules.pop(request["id"])
        events = [
            {"api": "EndTxn", "correlation_id": 9, "t": 1.0, "forwarded_at": 4.0, "response": {"error": 0}},
            {"api": "EndTxn", "correlation_id": 12, "t": 5.0},
        ]
        return {"ok": True, "report": {"rule": spec, "matched": 2, "state": "active", "events": events}}


class Nemesis:
    def __init__(self, tmp_path, relay):
        self.lab = relay
        self.ledger = Ledger(tmp_path / "faults.json")
        relays = {
            "wire_relay": {"places": {"c1": "lab-c1"}},
            "wire_brokers": {"places": {"n1": "lab-n1", "n2": "lab-n2"}},
        }
        self.ctx = type("Ctx", (), {"test": relays})()


def client(place="c1") -> ClientInfo:
    return ClientInfo(process=3, pid=1234, role="txn", txn_id="tx-3", group=None, place=place)


def test_start_switches_the_rule_on_for_the_clients_namespace_and_heal_reports_what_it_did(tmp_path):
    relay = Relay()
    nemesis = Nemesis(tmp_path, relay)
    step = next(plan([WIRE], ["client"], 0, 1.0, wire_rules=["delay:api=EndTxn:ms=3000"]))
    entry, value = wire.start(nemesis, step, Target("client:txn", (), (client(),)))
    (on,) = relay.rules.values()
    assert on == {"action": "delay", "api": "EndTxn", "delay_ms": 3000, "netns": "lab-c1", "id": entry["id"]}
    assert value["clients"] == [3] and value["rule"] == "delay:api=EndTxn:ms=3000"
    assert nemesis.ledger.entries() == [entry]
    done = wire.heal(relay, entry)
    assert relay.rules == {}
    assert done["rule_off"] and done["took"] == done["delayed"] == 2
    assert (done["forwarded"], done["answered"], done["by_api"]) == (1, 1, {"EndTxn": 2})
    assert [r["correlation_id"] for r in done["requests"]] == [9, 12]


def test_drop_response_heal_counts_the_responses_it_dropped():
    report = {
        "rule": {"action": "drop_response"},
        "matched": 3,
        "events": [{"api": "Produce", "response_dropped": True}, {"api": "Produce"}, {"api": "Produce"}],
    }
    done = wire.did(report)
    assert (done["took"], done["responses_dropped"]) == (3, 1)


def test_heal_after_the_relay_is_gone_says_so_and_does_not_raise(tmp_path):
    relay = Relay()
    nemesis = Nemesis(tmp_path, relay)
    step = next(plan([WIRE], ["client"], 0, 1.0, wire_rules=["hold:ms=10"]))
    entry, _ = wire.start(nemesis, step, Target("client:txn", (), (client(),)))
    relay.gone = True
    done = wire.heal(relay, entry)
    assert done["rule_off"] is False and "no wire relay answers" in done["why"]


def test_a_client_outside_the_relays_namespaces_is_skipped(tmp_path):
    nemesis = Nemesis(tmp_path, Relay())
    step = next(plan([WIRE], ["client"], 0, 1.0, wire_rules=["hold:ms=10"]))
    with pytest.raises(TargetUnavailable):
        wire.start(nemesis, step, Target("client:txn", (), (client("c9"),)))
    assert nemesis.ledger.entries() == []


def test_the_fault_table_knows_wire():
    found = kind(WIRE)
    assert (found.start, found.heal, found.module, found.chart) == ("start-wire", "stop-wire", "nemesis.wire", "wire")


def test_a_node_target_switches_the_rule_on_in_the_brokers_relay_for_those_nodes_only(tmp_path):
    relay = Relay()
    nemesis = Nemesis(tmp_path, relay)
    step = next(plan([WIRE], ["all"], 0, 1.0, wire_rules=["delay:api=WriteTxnMarkers:ms=300"]))
    entry, value = wire.start(nemesis, step, Target("all", ("n1", "n2", "k1")))
    (on,) = relay.rules.values()
    assert on["netns"] == ["lab-n1", "lab-n2"] and on["api"] == "WriteTxnMarkers"  # k1: a controller, no broker
    assert value["nodes"] == ["n1", "n2"] and value["source"] == "brokers" and "clients" not in value
    assert entry["relay"] == "brokers" and relay.asked == [True]
    done = wire.heal(relay, entry)
    assert done["rule_off"] and relay.asked == [True, True] and relay.rules == {}


def test_a_node_target_with_no_broker_there_is_skipped(tmp_path):
    nemesis = Nemesis(tmp_path, Relay())
    step = next(plan([WIRE], ["controller"], 0, 1.0, wire_rules=["hold:ms=10"]))
    with pytest.raises(TargetUnavailable, match="no broker there"):
        wire.start(nemesis, step, Target("controller", ("k1",)))
    assert nemesis.ledger.entries() == []
