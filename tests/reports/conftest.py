"""Hand-written run directories for report tests.

`make_run` writes test.json + history.jsonl + results.json of a small,
plausible run: four clients sending and polling three keys, a kill and a
partition window, and planted anomalies whose op ids are real completion
indices of the history. Hostile strings (`<script>` ...) are planted in a
record value, an error text, a topic name and a nemesis label.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

SCRIPT = "<script>window.__pwned=1;document.title='PWNED'</script>"
IMG = '<img src=x onerror="window.__pwned=2">'
HOSTILE_TOPIC = f"t-{SCRIPT}"
HOSTILE_ERROR = f"NOT_LEADER {IMG}"


def _history(seed: int = 7):
    """Events plus handy facts: {'send_ok': [(op, key, value, offset)], 'fail': [op], ...}."""
    rng = random.Random(seed)
    events, facts = [], {"send_ok": [], "poll_ok": [], "fail": []}
    offsets = {0: 0, 1: 0, 2: 0}
    next_value = {0: 0, 1: 0, 2: 0}
    clock = 0

    def add(event):
        event["index"] = len(events)
        events.append(event)
        return event["index"]

    def nemesis(f, value, at):
        add({"time": at, "process": "nemesis", "type": "invoke", "f": f})
        add({"time": at + 1_000_000, "process": "nemesis", "type": "info", "f": f, "value": value})

    plan = {
        4_000_000_000: ("kill", {"killed": ["n2"], "role": f"leader {IMG}"}),
        9_000_000_000: ("start", {"started": ["n2"]}),
        12_000_000_000: ("start-partition", {"isolated": [["n1"], ["n2", "n3"]]}),
        16_000_000_000: ("stop-partition", {"healed": True}),
    }
    while clock < 20_000_000_000:
        for at in [t for t in plan if t <= clock]:
            nemesis(*plan.pop(at), at)
        process = rng.randrange(4)
        key = rng.randrange(3)
        start = clock
        clock += rng.randrange(5_000_000, 40_000_000)
        if process % 2 == 0:
            value = next_value[key]
            next_value[key] += 1
            add(
                {
                    "time": start,
                    "process": process,
                    "type": "invoke",
                    "f": "send",
                    "mops": [{"f": "send", "key": key, "value": value}],
                }
            )
            if rng.random() < 0.08:
                op = add(
                    {
                        "time": clock,
                        "process": process,
                        "type": "fail",
                        "f": "send",
                        "error": "NOT_LEADER_OR_FOLLOWER",
                        "mops": [{"f": "send", "key": key, "value": value}],
                    }
                )
                facts["fail"].append(op)
                continue
            offset = offsets[key]
            offsets[key] += 1
            op = add(
                {
                    "time": clock,
                    "process": process,
                    "type": "ok",
                    "f": "send",
                    "mops": [{"f": "send", "key": key, "value": value, "offset": offset}],
                }
            )
            facts["send_ok"].append((op, key, value, offset))
        else:
            add({"time": start, "process": process, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]})
            high = offsets[key]
            mops = [{"f": "poll", "key": key, "offset": o, "value": o} for o in range(max(0, high - 2), high)]
            op = add({"time": clock, "process": process, "type": "ok", "f": "poll", "mops": mops})
            facts["poll_ok"].append((op, key))
    return events, facts


def _timeseries(events, bucket=1.0):
    invokes, rows = {}, {}
    for e in events:
        if e["process"] == "nemesis":
            continue
        if e["type"] == "invoke":
            invokes[e["process"]] = e
            continue
        start = invokes.pop(e["process"])["time"]
        slot = (float(int(e["time"] / 1e9 / bucket) * bucket), e["f"], e["type"])
        rows.setdefault(slot, []).append((e["time"] - start) / 1e6)
    out = []
    for (t, f, kind), lat in sorted(rows.items()):
        lat.sort()
        out.append(
            {
                "t": t,
                "f": f,
                "type": kind,
                "count": len(lat),
                "p50_ms": lat[len(lat) // 2],
                "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                "max_ms": lat[-1],
            }
        )
    return out


def make_run(
    directory: Path,
    *,
    verdict: str = "invalid",
    with_results: bool = True,
    minimal_results: bool = False,
    name: str = "kafka-send-kill",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    events, facts = _history()
    test = {
        "name": name,
        "system": "kafka",
        "version": "3.9.1",
        "workload": "send",
        "seed": 7,
        "backend": "docker",
        "setup": {
            "backend": "docker",
            "system": "kafka",
            "version": "3.9.1",
            "storage": "local log directories (KRaft)",
        },
        "concurrency": 4,
        "nodes": ["n1", "n2", "n3"],
        "keys": {"0": ["t0", 0], "1": ["t0", 1], "2": [HOSTILE_TOPIC, 0]},
        "client": {
            "acks": "all",
            "enable.idempotence": False,
            "isolation.level": "read_committed",
            "transactional": False,
            "auto.commit": False,
            "subscribe": False,
        },
        "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "replication.factor": 3},
        "drain": {"time_limit_s": 60, "complete": verdict != "unknown"},
        "nemesis": {"faults": ["kill", "partition"], "interval_s": 5},
    }
    (directory / "test.json").write_text(json.dumps(test))
    with (directory / "history.jsonl").open("w") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")
    # plant the hostile error text and record value into real events
    lost = next(s for s in facts["send_ok"] if events[s[0]]["time"] > 5_000_000_000)  # during the kill
    reader = next(op for op, key in facts["poll_ok"] if op > lost[0] + 20)
    failed = facts["fail"][0]
    events[failed]["error"] = HOSTILE_ERROR
    events[reader]["mops"].append({"f": "poll", "key": 2, "offset": 99, "value": SCRIPT})
    with (directory / "history.jsonl").open("w") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")
    if not with_results:
        return directory
    duration = events[-1]["time"] / 1e9
    windows = [
        {"f": "kill", "label": f"kill n2 {IMG}", "start_s": 4.001, "stop_s": 9.001, "value": {"killed": ["n2"]}},
        {
            "f": "partition",
            "label": "partition n1 | n2 n3",
            "start_s": 12.001,
            "stop_s": 16.001,
            "value": {"isolated": [["n1"], ["n2", "n3"]]},
        },
    ]
    anomalies = {}
    if verdict == "invalid":
        anomalies["lost-write"] = {
            "count": 3,
            "allowed": False,
            "why_allowed": None,
            "description": "an acknowledged write that no consumer ever read",
            "examples": [
                {
                    "key": lost[1],
                    "value": lost[2],
                    "offset": lost[3],
                    "ops": [lost[0], reader],
                    "nemesis": [f"kill n2 {IMG}"],
                }
            ],
        }
        anomalies["aborted-read"] = {
            "count": 1,
            "allowed": False,
            "why_allowed": None,
            "examples": [{"key": 2, "value": SCRIPT, "offset": 99, "ops": [failed, reader], "nemesis": []}],
        }
    anomalies["duplicate"] = {
        "count": 2,
        "allowed": True,
        "why_allowed": "enable.idempotence=false",
        "examples": [{"key": 1, "value": 5, "offsets": [5, 7], "ops": [facts["send_ok"][10][0]]}],
    }
    results = {"verdict": verdict, "anomalies": anomalies, "cut_short": False}
    if minimal_results:
        (directory / "results.json").write_text(json.dumps(results))
        return directory
    partitions = {}
    for key in sorted({str(ex["key"]) for a in anomalies.values() for ex in a["examples"]}):
        statuses = []
        for offset in range(120):
            status = "read"
            if key == str(lost[1]) and offset == lost[3]:
                status = "lost"
            elif key == "1" and offset == 7:
                status = "duplicate"
            elif key == "2" and offset == 99:
                status = "aborted"
            elif offset > 110:
                status = "acked-unread"
            statuses.append(
                {
                    "offset": offset,
                    "index": offset,
                    "values": [SCRIPT if status == "aborted" else offset],
                    "status": status,
                }
            )
        topic, partition = test["keys"][key]
        partitions[key] = {"topic": topic, "partition": partition, "truncated": False, "offsets": statuses}
    rows = _timeseries(events)
    ok = sum(r["count"] for r in rows if r["type"] == "ok")
    fail = sum(r["count"] for r in rows if r["type"] == "fail")
    by_f: dict = {}
    for r in rows:  # the same counts as the charts, so the page agrees with itself
        counts = by_f.setdefault(r["f"], {"ok": 0, "fail": 0, "info": 0})
        counts[r["type"]] = counts.get(r["type"], 0) + r["count"]
    results.update(
        {
            "config": {**test["client"], **test["broker"]},
            "stats": {
                "ops": ok + fail,
                "ok": ok,
                "fail": fail,
                "info": 0,
                "events": len(events),
                "duration_s": duration,
                "by_f": by_f,
                "latency": [
                    {
                        "f": "send",
                        "type": "ok",
                        "count": ok,
                        "p50_ms": 20.0,
                        "p90_ms": 35.0,
                        "p99_ms": 39.0,
                        "max_ms": 40.0,
                    }
                ],
                "timeseries": {"bucket_s": 1.0, "rows": rows},
                "lag": {
                    "bucket_s": 1.0,
                    "rows": [
                        {"t": float(t), "key": k, "lag_ms": 10.0 + (900 if 4 <= t <= 9 else 0) + k}
                        for t in range(int(duration))
                        for k in range(3)
                    ],
                },
            },
            "nemesis": windows,
            "partitions": partitions,
            "elle": {"available": False, "reason": "no Elle jar configured (--elle-jar or GREGOR_ELLE_JAR)"},
            "checker": {"engine": "spark", "seconds": 3.2, "events_per_s": 400.0},
        }
    )
    (directory / "results.json").write_text(json.dumps(results))
    return directory


@pytest.fixture
def invalid_run(tmp_path) -> Path:
    return make_run(tmp_path / "store" / "kafka-send-kill" / "20261122T010000")


@pytest.fixture
def planted():
    return {"script": SCRIPT, "img": IMG, "topic": HOSTILE_TOPIC, "error": HOSTILE_ERROR}


def add_evidence(run_dir: Path) -> Path:
    """evidence/segments.json as `gregor run` writes it, for the aborted-read instance (key 2,
    offset 99 of the hostile topic): on n1 its transactional batch, holding the planted script
    as a record value, and the ABORT marker that ended it; n2's replica ends before the offset;
    n3's dump failed with hostile text."""
    where = f"{HOSTILE_TOPIC}-0"
    batch = {"producer_id": 7, "producer_epoch": 2, "leader_epoch": 1, "transactional": True, "control": False}
    evidence = {
        "system": "kafka",
        "version": "3.9.1",
        "source": "each replica's segment files, printed by Kafka's DumpLogSegments",
        "window": 20,
        "partitions": [{"topic": HOSTILE_TOPIC, "partition": 0, "keys": [2], "offsets": [99]}],
        "seconds": 1.2,
        "nodes": {
            "n1": {
                "replicas": {
                    where: {
                        "files": ["/x/00000000000000000000.log"],
                        "log_start_offset": 0,
                        "log_end_offset": 102,
                        "batches_in_log": 40,
                        "batches": [
                            {
                                **batch,
                                "base_offset": 90,
                                "last_offset": 90,
                                "producer_id": 8,
                                "transactional": False,
                                "base_sequence": 3,
                                "last_sequence": 3,
                                "records": [{"offset": 90, "value": "90"}],
                            },
                            {
                                **batch,
                                "base_offset": 98,
                                "last_offset": 99,
                                "base_sequence": 10,
                                "last_sequence": 11,
                                "records": [{"offset": 98, "value": "98"}, {"offset": 99, "value": SCRIPT}],
                            },
                            {
                                **batch,
                                "base_offset": 100,
                                "last_offset": 100,
                                "base_sequence": -1,
                                "last_sequence": -1,
                                "control": True,
                                "marker": "ABORT",
                                "records": [{"offset": 100, "marker": "ABORT", "coordinator_epoch": 0}],
                            },
                        ],
                    }
                }
            },
            "n2": {
                "replicas": {
                    where: {
                        "files": [],
                        "log_start_offset": 0,
                        "log_end_offset": 90,
                        "batches_in_log": 30,
                        "batches": [],
                    }
                }
            },
            "n3": {"error": HOSTILE_ERROR},
        },
    }
    path = run_dir / "evidence" / "segments.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(evidence))
    return path
