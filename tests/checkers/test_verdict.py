"""Allowed or bad per configuration, the verdict rule, nemesis windows, and results.json end to end."""

from __future__ import annotations

import json

import pytest
from checker_histories import History, base_test, poll, send

from checkers import allowed, nemesis_windows
from checkers.check import check_dir, verdict
from checkers.history_format import NETEM_EMULATED


@pytest.mark.parametrize(
    "name, changes, why",
    [
        ("duplicate", {"client": {"enable.idempotence": False}}, "enable.idempotence=false"),
        ("lost-write", {"client": {"acks": 1}}, "acks=1"),
        ("unseen", {"client": {"acks": "0"}}, "acks=0"),
        (
            "inconsistent-offsets",
            {"broker": {"unclean.leader.election.enable": True}},
            "unclean.leader.election.enable=true",
        ),
        ("lost-write", {"broker": {"min.insync.replicas": 1}}, "min.insync.replicas=1"),
        ("unseen", {"drain": {"complete": False}}, "drain incomplete"),
        ("unseen", {"drain": None}, "drain incomplete"),
        ("aborted-read", {"client": {"isolation.level": "read_uncommitted"}}, "isolation.level=read_uncommitted"),
        ("uncommitted-read", {"client": {"isolation.level": "read_uncommitted"}}, "isolation.level=read_uncommitted"),
        ("offset-commit-loss", {"client": {"auto.commit": True}}, "auto.commit=true"),
        ("poll-skip", {"client": {"subscribe": True}}, "subscribe=true"),
        ("nonmonotonic-poll", {"client": {"subscribe": True}}, "subscribe=true"),
    ],
)
def test_setting_permits_anomaly_and_says_which(name, changes, why):
    assert allowed.why_allowed(name, base_test()) is None
    test = base_test(**changes)
    assert allowed.allowed(name, test)
    assert why in allowed.why_allowed(name, test)


@pytest.mark.parametrize(
    "name", ["G0", "G0-process", "G0-realtime", "int-send-skip", "G1c-ww", "G1c-ww-process", "G1c-ww-realtime"]
)
def test_always_permitted(name):
    assert allowed.allowed(name, base_test())


@pytest.mark.parametrize(
    "name",
    [
        "G1c",
        "G1c-process",
        "G1c-realtime",
        "precommitted-read",
        "torn-transaction",
        "zombie-write",
        "eos-duplicate",
        "eos-lost",
        "stuck-lso",
        "nonmonotonic-send",
        "int-poll-skip",
        "int-nonmonotonic-poll",
        "int-nonmonotonic-send",
    ],
)
def test_bad_under_any_configuration(name):
    permissive = base_test(
        client={
            "acks": 1,
            "enable.idempotence": False,
            "isolation.level": "read_uncommitted",
            "auto.commit": True,
            "subscribe": True,
        },
        broker={"min.insync.replicas": 1, "unclean.leader.election.enable": True},
        drain={"complete": False},
    )
    assert not allowed.allowed(name, permissive)
    assert allowed.describe(name) and "no description" not in allowed.describe(name)


def test_idempotence_does_not_permit_loss():
    assert not allowed.allowed("lost-write", base_test(client={"enable.idempotence": False}))


def _entry(count, ok):
    return {"count": count, "allowed": ok, "why_allowed": None}


def test_verdict_rules():
    assert verdict({"lost-write": _entry(1, False)}, True, False, True)[0] == "invalid"
    assert verdict({"duplicate": _entry(3, True)}, False, True, False)[0] == "valid"
    assert verdict({}, True, True, False)[0] == "unknown"
    assert verdict({}, False, False, False)[0] == "unknown"
    assert verdict({}, False, True, True)[0] == "unknown"
    assert verdict({}, False, True, False) == ("valid", [])
    assert verdict({"cycle-search-incomplete": _entry(1, True)}, False, True, False)[0] == "unknown"
    # skipping only always-permitted cycle families leaves the verdict alone
    assert verdict({"permitted-cycle-search-incomplete": _entry(1, True)}, False, True, False)[0] == "valid"


def test_nemesis_windows_pair_faults_with_their_heals():
    ops = [
        {"op": 1, "f": "kill", "value": {"killed": ["n2"], "role": "leader:3"}, "time": 100},
        {"op": 3, "f": "start-partition", "value": {"isolated": [["n1"], ["n2", "n3"]]}, "time": 150},
        {"op": 5, "f": "kill", "value": {"killed": ["n3"]}, "time": 160},
        {"op": 7, "f": "start", "value": {"started": ["n2"]}, "time": 200},
        {"op": 9, "f": "stop-partition", "value": {"healed": True}, "time": 300},
    ]
    windows = nemesis_windows.windows(ops)
    labels = [w["label"] for w in windows]
    assert labels == ["kill n2 (leader:3)", "partition n1 | n2 n3", "kill n3"]
    assert windows[0]["stop_index"] == 7 and windows[1]["stop_index"] == 9 and windows[2]["stop_s"] is None
    assert nemesis_windows.active(windows, 170) == labels
    assert nemesis_windows.active(windows, 250) == ["partition n1 | n2 n3", "kill n3"]
    assert nemesis_windows.active(windows, 50) == []


def test_windows_of_the_current_schema_close_by_nodes_and_clients():
    """Values carry `nodes` and `clients` (docs/HISTORY.md); a power cut and a
    lone leader are closed by their own heals, a client kill is an instant."""
    ops = [
        {"op": 1, "f": "power-off", "value": {"nodes": ["n1", "n2"], "role": "minority"}, "time": 100},
        {"op": 3, "f": "start-lone-leader", "value": {"nodes": ["n3"]}, "time": 110},
        {"op": 5, "f": "pause", "value": {"nodes": [], "clients": [4, 7]}, "time": 120},
        {"op": 7, "f": "kill-client", "value": {"nodes": [], "clients": [2]}, "time": 130},
        {"op": 9, "f": "resume", "value": {"nodes": [], "clients": [4, 7]}, "time": 140},
        {"op": 11, "f": "stop-lone-leader", "value": {"nodes": ["n3"]}, "time": 150},
        {"op": 13, "f": "power-on", "value": {"nodes": ["n1", "n2"]}, "time": 160},
    ]
    windows = nemesis_windows.windows(ops)
    assert [(w["label"], w["stop_index"]) for w in windows] == [
        ("power-off n1 n2 (minority)", 13),
        ("lone-leader n3", 11),
        ("pause clients 4 7", 9),
        ("kill-client client 2", 7),
    ]
    assert nemesis_windows.active(windows, 135) == ["power-off n1 n2 (minority)", "lone-leader n3", "pause clients 4 7"]
    assert nemesis_windows.active(windows, 155) == ["power-off n1 n2 (minority)"]


def test_netem_window_says_what_was_applied_and_whether_emulated():
    ops = [
        {
            "op": 1,
            "f": "start-netem",
            "time": 100,
            "value": {"nodes": ["n1"], "netem": "loss 20%", "applied_by": {"n1": "tc netem qdisc"}},
        },
        {"op": 3, "f": "stop-netem", "value": {"nodes": ["n1"]}, "time": 200},
        {
            "op": 5,
            "f": "start-netem",
            "time": 300,
            "value": {"nodes": ["n2"], "netem": "delay 200ms", "applied_by": {"n2": NETEM_EMULATED}},
        },
    ]
    labels = [w["label"] for w in nemesis_windows.windows(ops)]
    assert labels == ["netem n1: loss 20%", "netem n2: delay 200ms (emulated)"]


@pytest.mark.spark
def test_results_json_shape_with_examples_permissions_and_nemesis(spark, tmp_path):
    h = History()
    h.nemesis("kill", {"killed": ["n2"]})
    lost = h.op(0, "send", [send(0, 1, 0)])
    h.op(0, "send", [send(0, 2, 1)])
    h.op(0, "send", [send(1, 5, 0)])
    h.nemesis("start", {"started": ["n2"]})
    reader = h.op(1, "poll", [poll(0, 1, 2), poll(1, 0, 5), poll(1, 1, 5)])
    run = h.write(tmp_path, base_test(client={"enable.idempotence": False}))
    result = check_dir(run, spark=spark, max_examples=5, progress=lambda _: None)
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["verdict"] == result["verdict"] == "invalid"
    entry = on_disk["anomalies"]["lost-write"]
    assert (entry["count"], entry["allowed"], entry["why_allowed"]) == (1, False, None)
    example = entry["examples"][0]
    assert (example["key"], example["value"], example["offset"]) == (0, 1, 0)
    assert sorted(example["ops"]) == [lost, reader]
    assert example["nemesis"] == ["kill n2"]
    dup = on_disk["anomalies"]["duplicate"]
    assert (dup["count"], dup["allowed"], dup["why_allowed"]) == (1, True, "enable.idempotence=false")
    assert dup["examples"][0]["offsets"] == [0, 1] and dup["examples"][0]["nemesis"] == []
    assert {"ops": 4, "ok": 4, "info": 0, "fail": 0}.items() <= on_disk["stats"].items()
    assert on_disk["nemesis"][0]["label"] == "kill n2" and on_disk["nemesis"][0]["stop_index"] is not None
    statuses = {o["offset"]: o["status"] for o in on_disk["partitions"]["0"]["offsets"]}
    assert statuses == {0: "lost", 1: "read"}
    assert on_disk["partitions"]["1"]["offsets"][0]["status"] == "duplicate"
    assert "description" in entry and on_disk["config"]["enable.idempotence"] is False
    assert not list(run.glob(".results.json.*.tmp"))


def test_a_check_out_of_memory_is_one_line_naming_the_setting_and_a_value():
    from checkers.spark import out_of_memory

    heap_error = RuntimeError(
        "An error occurred while calling o123.collect.\n: java.lang.OutOfMemoryError: Java heap space"
    )
    short = out_of_memory(heap_error, "1g", 1400 * 2**20)
    assert "\n" not in str(short)
    assert "spark.driver.memory=1g" in str(short) and "--spark-conf spark.driver.memory=2g" in str(short)
    broadcast = RuntimeError("Not enough memory to build and broadcast the table to all worker nodes")
    assert "spark.driver.memory=4g" in str(out_of_memory(broadcast, "2048m", 10 * 2**20))
    assert "spark.driver.memory=3g" in str(out_of_memory(broadcast, "512m", int(2.5 * 2**30)))  # the history's size
    assert out_of_memory(ValueError("line 3: malformed JSON"), "1g", 100) is None
