"""The scripts of the `script` workload and their conductor (workloads/script.py).

Unit tests of one module: the pool and the client faults are stand-ins that
record what the conductor asks of them. The real scripts run against real
brokers through the wire relay in tests/controller/test_lab_repro.py and in the
catalogue's abort-sequence-reuse, delayed-endtxn and late-produce claims."""

import threading
import time

import pytest

from nemesis.wire import parse_rule
from workloads import script
from workloads.script import CLIENT_STEPS, CONDUCTOR_STEPS, GO, SCRIPTS, ScriptConductor


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_is_well_formed(name):
    steps = SCRIPTS[name].steps
    open_txn, rule_on = False, False
    for step in steps:
        assert step[0] in CLIENT_STEPS | CONDUCTOR_STEPS, step
        if step[0] == "begin":
            assert not open_txn, f"{name}: a transaction begins inside another"
            open_txn = True
        elif step[0] in ("send", "flush", "commit"):
            assert open_txn, f"{name}: {step[0]} outside a transaction"
            open_txn = step[0] != "commit"
        elif step[0] == "new-instance":
            assert not open_txn, f"{name}: a new instance inside a transaction"
        elif step[0] == "wire-on":
            assert not rule_on, f"{name}: a second rule before the first is off"
            parse_rule(step[1])  # a rule the relay takes
            rule_on = True
        elif step[0] == "await-wire":
            assert rule_on, f"{name}: waits for a rule that is not on"
        elif step[0] == "wire-off":
            assert rule_on
            rule_on = False
    assert not open_txn and not rule_on, f"{name}: ends with a transaction or a rule still open"


def test_a_script_has_one_client_on_the_first_key():
    assert script.layout(4, [3, 5, 7], {}) == [{"role": "script", "keys": [3], "txn": True}]


def test_an_unknown_script_is_refused_in_one_line():
    with pytest.raises(ValueError, match="unknown script 'nope'; the scripts are abort-sequence-reuse"):
        script.check_name("nope")


def test_late_produce_releases_the_held_produce_only_after_the_abort_and_then_changes_instance():
    steps = SCRIPTS["late-produce"].steps
    names = [step[0] for step in steps]
    rule = parse_rule(next(step[1] for step in steps if step[0] == "wire-on"))
    assert (rule["action"], rule["api"], rule.get("count")) == ("hold", "Produce", None)  # every Produce while on
    on, awaited, new = names.index("wire-on"), names.index("await-wire"), names.index("new-instance")
    # the held transaction ends (its commit step, where a failed one is aborted) before the wait
    assert names[on + 1 : awaited] == ["begin", "send", "commit"]
    assert awaited < names.index("wire-off") < new < len(names) - 3 and names[new + 1 :] == ["begin", "send", "commit"]


class Pool:
    """Where the client stands, as the pool learns it from `_script` events."""

    def __init__(self):
        self.at = None
        self.sent = []

    def script_step(self, slot):
        return self.at

    def pid(self, slot):
        return 1234

    def send(self, slot, message):
        self.sent.append(message)


class Faults:
    def __init__(self, log):
        self.log = log

    def wire_on(self, lab, relay, slot, text, why):
        self.log.append(("on", text))
        return {"id": "e1", "clients": [{"process": 0}]}

    def wire_off(self, lab, entry, why):
        self.log.append(("off", entry["id"], why))

    def resume_all(self, why):
        pass


class Lab:
    """The relay's report: the held request is answered on the third look."""

    def __init__(self, log):
        self.log, self.looks = log, 0

    def wire_call(self, request):
        self.looks += 1
        self.log.append(("report", request["id"]))
        answered = {"response": {"error": 0}} if self.looks >= 3 else {}
        return {"reports": [{"events": [{"api": "EndTxn", **answered}]}]}


def test_the_conductor_acts_only_when_the_client_stands_at_its_step_and_then_lets_it_go():
    log = []
    pool = Pool()
    conductor = ScriptConductor(Faults(log), pool, Lab(log), {"wire_relay": {}}, 0, "delayed-endtxn")
    steps = SCRIPTS["delayed-endtxn"].steps
    own = [i for i, step in enumerate(steps) if step[0] in CONDUCTOR_STEPS]
    conductor.start()
    try:
        for index in own:
            time.sleep(0.05)
            before = len(log)
            assert (GO, index) not in pool.sent, "went ahead before the client reached the step"
            pool.at = index
            deadline = time.monotonic() + 5
            while (GO, index) not in pool.sent and time.monotonic() < deadline:
                time.sleep(0.01)
            assert (GO, index) in pool.sent
            assert len(log) > before, f"step {steps[index]} did nothing"
    finally:
        conductor.stop()
    kinds = [entry[0] for entry in log]
    assert kinds[0] == "on" and log[0][1] == "hold:api=EndTxn:ms=20000:count=1"
    assert kinds.count("report") == 3  # it waited until the held request was answered
    assert log[-1] == ("off", "e1", "script")  # switched off by the script, not by stop()
    assert pool.sent == [(GO, i) for i in own]


def test_stopping_the_conductor_switches_a_rule_still_on_off():
    log = []
    pool = Pool()
    conductor = ScriptConductor(Faults(log), pool, Lab(log), {"wire_relay": {}}, 0, "abort-sequence-reuse")
    first = next(i for i, step in enumerate(SCRIPTS["abort-sequence-reuse"].steps) if step[0] == "wire-on")
    conductor.start()
    pool.at = first
    deadline = time.monotonic() + 5
    while (GO, first) not in pool.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    conductor.stop()  # the run ends before the script switches it off
    assert log == [("on", "drop-response:api=Produce"), ("off", "e1", "end of main phase")]
    assert not any(t.name == "script-conductor" and t.is_alive() for t in threading.enumerate())
