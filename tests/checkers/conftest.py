"""Shared fixtures of the checker tests: one real Spark session and hand-written runs.

`write_run(tmp_path, events, test=None)` writes history.jsonl (filling in
`index` and `time` where an event leaves them out) and test.json;
`base_test()` is a configuration under which every anomaly is bad.
`op(...)` and `nemesis(...)` build invoke/completion pairs tersely.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

BASE_TEST = {
    "name": "hand-written", "system": "kafka", "version": "3.9.1", "workload": "txn",
    "seed": 1, "concurrency": 4,
    "keys": {"0": ["t0", 0], "1": ["t0", 1], "2": ["t1", 0], "3": ["t1", 1]},
    "client": {"acks": "all", "enable.idempotence": True, "isolation.level": "read_committed",
               "transactional": True, "auto.commit": False, "subscribe": False,
               "transaction.timeout.ms": 10000},
    "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False,
               "replication.factor": 3},
    "drain": {"time_limit_s": 60, "complete": True},
}


def base_test(**changes) -> dict:
    """A safe configuration (nothing permitted); `client=`, `broker=`, `drain=` dicts are merged in."""
    test = copy.deepcopy(BASE_TEST)
    for section, value in changes.items():
        if isinstance(value, dict) and isinstance(test.get(section), dict):
            test[section].update(value)
        else:
            test[section] = value
    return test


def write_run(tmp_path: Path, events: list[dict], test: dict | None = None) -> Path:
    """Writes a run directory; events get `index` = position and `time` = 1000 * index unless given."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    lines = []
    for position, event in enumerate(events):
        event = dict(event)
        event.setdefault("index", position)
        event.setdefault("time", 1000 * position)
        lines.append(json.dumps(event))
    (tmp_path / "history.jsonl").write_text("".join(line + "\n" for line in lines))
    (tmp_path / "test.json").write_text(json.dumps(base_test() if test is None else test))
    return tmp_path


def op(process, f, mops=None, type="ok", invoke_mops=None, **fields) -> list[dict]:
    """An invoke and its completion. `mops` are the completion's; the invoke's
    default to them without offsets and with one bare poll for all records read."""
    mops = mops or []
    if invoke_mops is None:
        invoke_mops = []
        for mop in mops:
            if mop["f"] == "send":
                invoke_mops.append({"f": "send", "key": mop["key"], "value": mop["value"]})
            elif mop["f"] == "poll":
                if {"f": "poll"} not in invoke_mops:
                    invoke_mops.append({"f": "poll"})
            else:
                invoke_mops.append(dict(mop))
    op_fields = {k: v for k, v in fields.items() if k in ("txn_id", "group", "keys")}
    invoke = {"process": process, "type": "invoke", "f": f, **op_fields}
    if invoke_mops or mops:
        invoke["mops"] = invoke_mops
    completion = {"process": process, "type": type, "f": f, **fields}
    if mops or invoke_mops:
        completion["mops"] = mops
    return [invoke, completion]


def send(key, value, offset=None) -> dict:
    mop = {"f": "send", "key": key, "value": value}
    if offset is not None:
        mop["offset"] = offset
    return mop


def poll(key, offset, value) -> dict:
    return {"f": "poll", "key": key, "offset": offset, "value": value}


def nemesis(f, value, start=True) -> list[dict]:
    """A nemesis op: invoke plus the info completion saying what was done."""
    return [{"process": "nemesis", "type": "invoke", "f": f},
            {"process": "nemesis", "type": "info", "f": f, "value": value}]


def flatten(*groups) -> list[dict]:
    """Concatenates op pairs and single events into one history."""
    events = []
    for group in groups:
        events.extend(group if isinstance(group, list) else [group])
    return events


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session for the whole test run."""
    from checkers.spark import get_spark

    session = get_spark("local[2]", {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "768m"})
    yield session
    session.stop()


@pytest.fixture(name="write_run")
def write_run_fixture():
    return write_run


@pytest.fixture(name="base_test")
def base_test_fixture():
    return base_test
