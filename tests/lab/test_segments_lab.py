"""The brokers' own record of a partition on a live 3-node lab (harness/systems/kafka/segments.py):
after a committed and an aborted transaction written with confluent-kafka, every replica's dump
shows the producer id, both batches, and the COMMIT and ABORT markers that ended them; and
`gregor run`'s collection (harness/controller/evidence.py) writes them for an aborted-read."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from harness.controller import evidence
from lab.helpers import needs_root

pytestmark = [pytest.mark.lab, needs_root]
TOPIC = "gregor-segments"


@pytest.fixture(scope="module")
def written(lab):
    """Offsets: 0 an idempotent record; 1-3 a committed transaction, 4 its COMMIT;
    5-6 an aborted one, 7 its ABORT."""
    lab.admin(timeout=15).create_topic(TOPIC, 1, replication_factor=3, config={"min.insync.replicas": "2"})
    lab.wait_healthy(topics=[TOPIC], timeout=60)
    plain = Producer({"bootstrap.servers": lab.bootstrap_servers, "enable.idempotence": True, "acks": "all"})
    plain.produce(TOPIC, value=b"0")
    assert plain.flush(30) == 0
    txn = Producer({"bootstrap.servers": lab.bootstrap_servers, "transactional.id": "gregor-seg", "acks": "all"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for value in (b"1", b"2", b"3"):
        txn.produce(TOPIC, value=value)
    txn.commit_transaction(30)
    txn.begin_transaction()
    for value in (b"5", b"6"):
        txn.produce(TOPIC, value=value)
    assert txn.flush(30) == 0
    txn.abort_transaction(30)
    return lab


def test_every_replica_shows_both_transactions_and_their_markers(written):
    lab = written
    started = time.monotonic()
    found = lab.system.segment_dump(lab, {(TOPIC, 0): [2, 5]})
    seconds = time.monotonic() - started
    print(f"segment dump of 1 partition on {len(found['nodes'])} nodes: {seconds:.2f} s")
    assert sorted(found["nodes"]) == ["n1", "n2", "n3"]
    for name, node in found["nodes"].items():
        assert "error" not in node, (name, node)
        replica = node["replicas"][f"{TOPIC}-0"]
        assert replica["log_start_offset"] == 0 and replica["log_end_offset"] == 8
        shape = [
            (b["base_offset"], b["last_offset"], b["transactional"], b["control"], b.get("marker"))
            for b in replica["batches"]
        ]
        assert shape == [
            (0, 0, False, False, None),
            (1, 3, True, False, None),
            (4, 4, True, True, "COMMIT"),
            (5, 6, True, False, None),
            (7, 7, True, True, "ABORT"),
        ], name
        plain, committed, commit, aborted, abort = replica["batches"]
        producer = committed["producer_id"]
        assert producer >= 0 and plain["producer_id"] not in (producer, -1)
        assert {b["producer_id"] for b in (commit, aborted, abort)} == {producer}
        assert (committed["base_sequence"], committed["last_sequence"]) == (0, 2)
        assert (aborted["base_sequence"], aborted["last_sequence"]) == (3, 4)
        assert [r["value"] for r in aborted["records"]] == ["5", "6"]
    assert seconds < 60


def test_the_run_collection_writes_the_batches_an_aborted_read_names(written, tmp_path):
    (tmp_path / "test.json").write_text(json.dumps({"keys": {"0": [TOPIC, 0]}}))
    named = {"aborted-read": {"count": 1, "examples": [{"key": 0, "value": 6, "offset": 6}]}}
    (tmp_path / "results.json").write_text(json.dumps({"anomalies": named}))
    said: list[str] = []
    evidence.collect(written, tmp_path, said.append)
    found = json.loads((tmp_path / "evidence" / "segments.json").read_text())
    assert found["system"] == "kafka" and found["partitions"][0]["offsets"] == [6]
    batches = found["nodes"]["n1"]["replicas"][f"{TOPIC}-0"]["batches"]
    assert [(b["base_offset"], b.get("marker")) for b in batches][-2:] == [(5, None), (7, "ABORT")]
    assert "1 partition(s) from 3 node(s)" in said[-1]
