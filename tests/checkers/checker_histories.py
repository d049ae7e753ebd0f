"""Builders for hand-written histories in the checker tests (shared by conftest and tests).

A uniquely named module (not conftest) so test files can import it directly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

BASE_TEST = {
    "name": "hand-written",
    "system": "kafka",
    "version": "3.9.1",
    "workload": "txn",
    "seed": 1,
    "concurrency": 4,
    "keys": {str(k): ["t0", k] for k in range(64)},
    "client": {
        "acks": "all",
        "enable.idempotence": True,
        "isolation.level": "read_committed",
        "transactional": True,
        "auto.commit": False,
        "subscribe": False,
        "transaction.timeout.ms": 10000,
    },
    "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "replication.factor": 3},
    "drain": {"time_limit_s": 60, "complete": True},
}


def base_test(**changes) -> dict:
    """A safe configuration (nothing permitted, drain complete); section dicts are merged in."""
    test = copy.deepcopy(BASE_TEST)
    for section, value in changes.items():
        if isinstance(value, dict) and isinstance(test.get(section), dict):
            test[section].update(value)
        else:
            test[section] = value
    return test


def write_run(tmp_path: Path, events: list[dict], test: dict | None = None) -> Path:
    """Writes history.jsonl and test.json; events get `index` = position and
    `time` = 1000 * index unless they carry their own."""
    tmp_path = Path(tmp_path)
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


def send(key, value, offset=None) -> dict:
    mop = {"f": "send", "key": key, "value": value}
    if offset is not None:
        mop["offset"] = offset
    return mop


def poll(key, offset, value) -> dict:
    return {"f": "poll", "key": key, "offset": offset, "value": value}


def _invoke_mops(mops):
    result = []
    for mop in mops:
        if mop["f"] == "send":
            result.append({"f": "send", "key": mop["key"], "value": mop["value"]})
        elif mop["f"] == "poll":
            if {"f": "poll"} not in result:
                result.append({"f": "poll"})
        else:
            result.append(dict(mop))
    return result


class History:
    """Appends ops in order; each method returns the op id (index of its completion)."""

    def __init__(self):
        self.events: list[dict] = []

    def op(self, process, f, mops=None, type="ok", **fields) -> int:
        mops = list(mops or [])
        shared = {k: v for k, v in fields.items() if k in ("txn_id", "group", "keys")}
        invoke = {"process": process, "type": "invoke", "f": f, **shared}
        completion = {"process": process, "type": type, "f": f, **fields}
        if mops:
            invoke["mops"] = _invoke_mops(mops)
            completion["mops"] = mops
        self.events += [invoke, completion]
        return len(self.events) - 1

    def invoke(self, process, f, mops=None, **fields) -> int:
        """An invoke that never completes (the history is cut short)."""
        event = {"process": process, "type": "invoke", "f": f, **fields}
        if mops:
            event["mops"] = _invoke_mops(mops)
        self.events.append(event)
        return len(self.events) - 1

    def nemesis(self, f, value) -> int:
        self.events += [
            {"process": "nemesis", "type": "invoke", "f": f},
            {"process": "nemesis", "type": "info", "f": f, "value": value},
        ]
        return len(self.events) - 1

    def write(self, tmp_path, test=None) -> Path:
        return write_run(tmp_path, self.events, test)


def rows(df) -> list[dict]:
    """Collects a (small) anomaly DataFrame as dicts."""
    return [row.asDict() for row in df.collect()]


def named(found: list[dict], name: str, key=None) -> list[dict]:
    return [r for r in found if r["name"] == name and (key is None or r["key"] == key)]
