"""An input copied twice is shown to be librdkafka's reproduced stale fetch only when the
log of a client that copied it shows that fetch (harness/controller/stale_fetch.py), and the
report says so beside it, or says how to see it (reports/evidence.py)."""

import copy
import json

import pytest

from harness.controller.known_findings import explain_run
from harness.controller.stale_fetch import REPORT, explain
from reports.evidence import client_log_note, known_finding
from reports.stored_run import Run
from workloads.librdkafka_log import DEBUG, STALE_FETCH, fetches_outside_assignment

TOPIC = "g-in0"
# librdkafka's own lines (2026-11-30, trimmed): partition 1 was started, removed, then
# fetched from offset 0 while unassigned, and came back at 220; partition 2 was fetched
# only while assigned.
LOG = [
    f"%7|1.0|SRVPEND|c#consumer-1| [thrd:main]: Starting pending assigned partition {TOPIC} [1] at offset INVALID",
    f"%7|1.0|SRVPEND|c#consumer-1| [thrd:main]: Starting pending assigned partition {TOPIC} [2] at offset 205",
    f"%7|1.0|FETCH|c#consumer-1| [thrd:main]: Partition {TOPIC} [2] start fetching at offset 205 (leader epoch -1)",
    f"%7|1.1|REMOVE|c#consumer-1| [thrd:main]: Removing {TOPIC} [1] from assignment (started=true, wait_stop=true)",
    f"%7|1.6|FETCH|c#consumer-1| [thrd:main]: Partition {TOPIC} [1] start fetching at offset 0 (leader epoch 0)",
    f'%7|9.0|PARTADD|c#consumer-1| [thrd:main]: Group "g": add {TOPIC} [1]',
    f"%7|9.0|FETCH|c#consumer-1| [thrd:main]: Partition {TOPIC} [1] start fetching at offset 220 (leader epoch -1)",
]
KEYS = {"1": [TOPIC, 1], "2": [TOPIC, 2]}
CONCURRENCY = 4
# Input key 1 offset 9 was copied by op 30 (process 1, slot 1) and op 41 (process 7, slot 3).
HISTORY = [
    {"index": 30, "process": 1, "type": "ok", "f": "txn", "mops": []},
    {"index": 41, "process": 7, "type": "ok", "f": "txn", "mops": []},
]
DUPLICATE = {"key": 1, "value": 113, "offset": 9, "ops": [30, 41]}


def results(*examples):
    return {"anomalies": {"eos-duplicate": {"count": len(examples), "examples": list(examples)}}}


def stale(slot=3, log=LOG):
    return {slot: fetches_outside_assignment(log)}


def test_a_copier_whose_own_log_shows_a_fetch_outside_its_assignment_is_the_finding():
    (shown,) = explain(HISTORY, results(DUPLICATE), KEYS, CONCURRENCY, stale())
    assert shown["finding"] == STALE_FETCH and shown["report"] == REPORT == f"docs/findings/{STALE_FETCH}.md"
    assert (shown["key"], shown["value"], shown["offset"], shown["process"], shown["fetched_from"]) == (1, 113, 9, 7, 0)
    assert shown["log"] == "clients/client-3.log" and "start fetching at offset 0" in shown["line"]


@pytest.mark.parametrize(
    "change",
    [
        lambda example, logs: logs.update({0: logs.pop(3)}),  # the stale fetch is another client's (slot 0)
        lambda example, logs: example.update(key=2),  # the input is on a partition fetched only while assigned
        lambda example, logs: logs.update({3: fetches_outside_assignment(LOG[:4] + LOG[5:])}),  # no stale fetch
        lambda example, logs: logs.update(
            {3: fetches_outside_assignment([line.replace("offset 0", "offset 10") for line in LOG])}
        ),
        lambda example, logs: example.update(ops=[30]),  # only the slot-1 client copied it
        lambda example, logs: example.update(offset=None),  # the input has no offset
        lambda example, logs: example.update(key=5),  # a key the run does not map
    ],
)
def test_anything_short_of_the_copiers_own_stale_fetch_is_not_the_finding(change):
    example, logs = copy.deepcopy(DUPLICATE), stale()
    change(example, logs)
    assert explain(HISTORY, results(example), KEYS, CONCURRENCY, logs) == []


def run_dir(tmp_path, log_slot=3, consumer_config=None):
    (tmp_path / "clients").mkdir()
    (tmp_path / "clients" / f"client-{log_slot}.log").write_text("\n".join(LOG) + "\n")
    other = {"index": 5, "process": 2, "type": "ok", "f": "poll", "mops": []}
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [other, *HISTORY]))
    test = {
        "concurrency": CONCURRENCY,
        "keys": KEYS,
        "client": {"library": "librdkafka", "consumer_config": consumer_config or {}},
    }
    (tmp_path / "test.json").write_text(json.dumps(test))
    return test


def test_a_run_directory_is_read_through_its_client_logs_without_broker_evidence(tmp_path):
    test = run_dir(tmp_path)
    (shown,) = explain_run(tmp_path, results(DUPLICATE), test, {})
    assert (shown["finding"], shown["process"], shown["log"]) == (STALE_FETCH, 7, "clients/client-3.log")
    assert explain_run(tmp_path, results({**DUPLICATE, "ops": [30]}), test, {}) == []
    assert explain_run(tmp_path, {"anomalies": {}}, test, {}) == []


def test_a_run_with_no_log_of_the_copier_explains_nothing(tmp_path):
    test = run_dir(tmp_path, log_slot=0)
    assert explain_run(tmp_path, results(DUPLICATE), test, {}) == []


def test_the_report_names_the_finding_beside_its_instance_and_escapes_the_log_line():
    (shown,) = explain(HISTORY, results(DUPLICATE), KEYS, CONCURRENCY, stale())
    shown["line"] = "<script>x</script> start fetching at offset 0"
    line = known_finding({"known_findings": [shown]}, DUPLICATE)
    assert STALE_FETCH in line and "process 7" in line and "from offset 0" in line and "client-3.log" in line
    assert "<script>" not in line and "&lt;script&gt;" in line
    assert known_finding({"known_findings": [shown]}, {**DUPLICATE, "value": 114}) == ""


@pytest.mark.parametrize(
    "name, client, shown",
    [
        ("eos-duplicate", {"library": "librdkafka", "consumer_config": {}}, True),
        ("eos-duplicate", {"consumer_config": {"debug": "cgrp,consumer,topic,fetch"}}, False),  # it logged
        ("eos-duplicate", {"consumer_config": {"debug": "all"}}, False),
        ("eos-duplicate", {"consumer_config": {"debug": "cgrp"}}, True),  # no fetch lines
        ("eos-duplicate", {"library": "java"}, False),  # another client
        ("eos-duplicate", {"library": "librdkafka", "copier.offsets": "after"}, False),  # commits after its output
        ("eos-duplicate", {"library": "librdkafka", "copier.offsets": "txn"}, True),
        ("eos-lost", {"library": "librdkafka"}, False),  # another anomaly
    ],
)
def test_the_report_says_how_to_see_the_cause_only_where_the_run_could_not_show_it(tmp_path, name, client, shown):
    note = client_log_note(Run(directory=tmp_path, test={"client": client}, results={}), name)
    assert bool(note) is shown
    if shown:
        assert f"--consumer-config {DEBUG}" in note and STALE_FETCH in note
