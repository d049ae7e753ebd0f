"""Which partitions evidence/segments.json covers, and that collecting it never fails a run
(harness/controller/evidence.py; stand-in labs: the dump itself is tests/lab/test_segments_lab.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from harness.controller import evidence

KEYS = {str(k): [f"t{k // 2}", k % 2] for k in range(60)}


def results(**anomalies) -> dict:
    return {"anomalies": {name: {"count": len(ex), "examples": ex} for name, ex in anomalies.items()}}


def test_evidence_kinds_come_first_and_offsets_merge_per_partition():
    found, left_out = evidence.named_partitions(
        results(
            **{
                "poll-skip": [{"key": 3, "offsets": [7, 9]}],
                "duplicate": [{"key": 1, "offsets": [4, 2]}],
                "lost-write": [{"key": 1, "offset": 9}, {"key": 2, "offset": 1}],
                "unseen": [{"key": 4, "value": 5}],  # no offset: nothing to look up
            }
        ),
        KEYS,
    )
    assert left_out == 0
    assert [(p["topic"], p["partition"], p["offsets"], p["anomalies"]) for p in found] == [
        ("t0", 1, [2, 4, 9], ["lost-write", "duplicate"]),
        ("t1", 0, [1], ["lost-write"]),
        ("t1", 1, [7, 9], ["poll-skip"]),
    ]


def test_the_partition_cap_is_stated():
    examples = [{"key": k, "offset": k} for k in range(evidence.MAX_PARTITIONS + 3)]
    found, left_out = evidence.named_partitions(results(**{"aborted-read": examples}), KEYS)
    assert len(found) == evidence.MAX_PARTITIONS and left_out == 3


def run_dir(tmp_path, anomalies: dict):
    (tmp_path / "test.json").write_text(json.dumps({"keys": KEYS}))
    (tmp_path / "results.json").write_text(json.dumps(anomalies))
    return tmp_path


def written(tmp_path) -> dict:
    return json.loads((tmp_path / "evidence" / "segments.json").read_text())


def test_a_system_without_segments_writes_its_reason(tmp_path):
    lab = SimpleNamespace(system=SimpleNamespace(name="kfake", no_segment_dump="no files"), version="v1")
    said = []
    evidence.collect(lab, run_dir(tmp_path, results(**{"lost-write": [{"key": 1, "offset": 3}]})), said.append)
    assert written(tmp_path)["note"] == "no segment dump for kfake: no files"
    assert said[-1].startswith("evidence: no segment dump for kfake: no files")


def test_a_failing_dump_is_recorded_not_raised(tmp_path):
    def dump(lab, wanted):
        assert wanted == {("t0", 1): [3]}
        raise RuntimeError("n1: DumpLogSegments failed: no java\nsecond line")

    lab = SimpleNamespace(system=SimpleNamespace(name="kafka", segment_dump=dump), version="3.9.1")
    evidence.collect(lab, run_dir(tmp_path, results(**{"lost-write": [{"key": 1, "offset": 3}]})), print)
    found = written(tmp_path)
    assert found["error"] == "n1: DumpLogSegments failed: no java"
    assert found["partitions"][0]["topic"] == "t0"


def test_nothing_named_means_no_dump(tmp_path):
    def dump(lab, wanted):
        raise AssertionError("no partition to dump")

    lab = SimpleNamespace(system=SimpleNamespace(name="kafka", segment_dump=dump), version="3.9.1")
    evidence.collect(lab, run_dir(tmp_path, results()), print)
    assert written(tmp_path)["note"].startswith("no anomaly instance named a partition")
    (tmp_path / "results.json").unlink()
    evidence.collect(lab, tmp_path, print)
    assert written(tmp_path)["note"].startswith("no results.json")


def test_a_copiers_stale_fetch_is_named_without_the_brokers_segments(tmp_path):
    """The stale fetch shows in the client's own log (harness/controller/stale_fetch.py), so a
    system with no segment files still gets it in known_findings."""
    lab = SimpleNamespace(system=SimpleNamespace(name="kfake", no_segment_dump="no files"), version="v1")
    run_dir(tmp_path, results(**{"eos-duplicate": [{"key": 1, "value": 9, "offset": 3, "ops": [0, 1]}]}))
    (tmp_path / "test.json").write_text(json.dumps({"keys": KEYS, "concurrency": 2}))
    ops = [{"index": i, "process": i, "type": "ok", "f": "txn", "mops": []} for i in (0, 1)]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    (tmp_path / "clients").mkdir()
    (tmp_path / "clients" / "client-1.log").write_text(
        "Removing t0 [1] from assignment (started=true)\nPartition t0 [1] start fetching at offset 2 (leader epoch 0)\n"
    )
    evidence.collect(lab, tmp_path, print)
    found = written(tmp_path)
    assert found["note"] == "no segment dump for kfake: no files"
    assert [(f["finding"], f["process"], f["fetched_from"]) for f in found["known_findings"]] == [
        ("librdkafka-stale-fetch-redelivery", 1, 2)
    ]
    (tmp_path / "clients" / "client-1.log").write_text(  # fetched while assigned
        "Starting pending assigned partition t0 [1] at offset 2\nPartition t0 [1] start fetching at offset 2\n"
    )
    evidence.collect(lab, tmp_path, print)
    assert written(tmp_path)["known_findings"] == []
