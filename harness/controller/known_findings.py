"""Bad instances shown, one by one, to be a finding Gregor has reproduced.

A red run stays red. But where the brokers' own log, or the client's, shows
that an instance is exactly the mechanism of a reproduced finding, evidence/segments.json says so
("known_findings"), the report shows it beside the instance, and the
catalogue's tests can tell that finding from a new bug.

librdkafka-abort-sequence-reuse (docs/findings/): a committed write that was
never read (lost-write, unseen) whose acknowledged offset holds, in a
replica's log, a batch of the same producer id and epoch that does not hold
the write's value and that an ABORT marker ended. The write's `ok` op says
which producer id and epoch it ran under; the batch is an aborted record of
the same producer, which the broker took the write for.

librdkafka-stale-fetch-redelivery: an input copied twice, where the copier's
own librdkafka log shows the fetch behind it (harness/controller/stale_fetch.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.controller import stale_fetch
from harness.systems.kafka.segments import ending_marker

SEQUENCE_REUSE = "librdkafka-abort-sequence-reuse"
REPORT = "docs/findings/librdkafka-abort-sequence-reuse.md"
LOSSES = ("lost-write", "unseen")


def explain_run(run_dir: Path, results: dict, test: dict, evidence: dict) -> list[dict]:
    """explain() and the copier's stale fetch (harness/controller/stale_fetch.py) for a run
    directory, reading only the history events the instances name."""
    wanted = stale_fetch.wanted_ops(results)
    if evidence.get("nodes"):
        wanted |= {
            index
            for name in LOSSES
            for example in ((results.get("anomalies") or {}).get(name) or {}).get("examples") or []
            for index in example.get("ops") or []
        }
    if not wanted:
        return []
    events = []
    with open(Path(run_dir) / "history.jsonl", encoding="utf-8") as lines:
        for line in lines:
            if '"index":' in line:
                event = json.loads(line)
                if event.get("index") in wanted:
                    events.append(event)
    keys = test.get("keys") or {}
    return explain(events, results, keys, evidence) + stale_fetch.explain_run(run_dir, events, results, test)


def explain(history: list[dict], results: dict, keys: dict, evidence: dict) -> list[dict]:
    """Each lost or unseen write of the results that the brokers' batches show to be the
    sequence-reuse finding: key, value, offset, and the node and batch that show it."""
    by_index = {event.get("index"): event for event in history}
    found = []
    for name in LOSSES:
        for example in ((results.get("anomalies") or {}).get(name) or {}).get("examples") or []:
            shown = _sequence_reuse(example, by_index, keys, evidence)
            if shown is not None:
                found.append({"finding": SEQUENCE_REUSE, "report": REPORT, "anomaly": name, **shown})
    return found


def _sequence_reuse(example: dict, by_index: dict, keys: dict, evidence: dict) -> dict | None:
    key, value, offset = example.get("key"), example.get("value"), example.get("offset")
    where = keys.get(str(key))
    if not isinstance(offset, int) or not where:
        return None
    ops = [by_index.get(i) for i in example.get("ops") or []]
    writer = next(
        (
            op
            for op in ops
            if op and op.get("type") == "ok" and op.get("producer_id") is not None and _sent(op, key, value)
        ),
        None,
    )
    if writer is None:
        return None
    for node, dumped in sorted((evidence.get("nodes") or {}).items()):
        batches = ((dumped.get("replicas") or {}).get(f"{where[0]}-{where[1]}") or {}).get("batches") or []
        for batch in batches:
            if batch.get("control") or not batch.get("transactional"):
                continue
            if not batch["base_offset"] <= offset <= batch["last_offset"]:
                continue
            same_producer = (batch.get("producer_id"), batch.get("producer_epoch")) == (
                writer["producer_id"],
                writer.get("epoch"),
            )
            values = {str(record.get("value")) for record in batch.get("records") or []}
            marker = ending_marker(batches, batch)
            if same_producer and str(value) not in values and marker is not None and marker.get("marker") == "ABORT":
                return {
                    "key": key,
                    "value": value,
                    "offset": offset,
                    "node": node,
                    "producer_id": batch["producer_id"],
                    "producer_epoch": batch["producer_epoch"],
                    "base_sequence": batch.get("base_sequence"),
                    "aborted_at": marker["base_offset"],
                }
    return None


def _sent(op: dict, key, value) -> bool:
    return any(m.get("f") == "send" and m.get("key") == key and m.get("value") == value for m in op.get("mops") or [])
