"""Copies shown, one by one, to be librdkafka's stale-fetch redelivery.

A red run stays red: the input was copied twice. But librdkafka 2.16.0 can
hand a copier records it fetched while the partition was another member's
(reproduced: docs/findings/librdkafka-stale-fetch-redelivery.md). Only the
copier's own log shows that: its `clients/client-<slot>.log`, with the
`cgrp` and `fetch` debug contexts on (workloads/librdkafka_log.DEBUG). An
eos-duplicate is that finding when one of the ops that copied the input ran
in a client whose log shows it fetching the input's partition outside its
assignment, from an offset at or below the input's.
"""

from __future__ import annotations

from pathlib import Path

from workloads.librdkafka_log import STALE_FETCH, fetches_outside_assignment

REPORT = f"docs/findings/{STALE_FETCH}.md"
ANOMALY = "eos-duplicate"
LINE_CHARS = 300


def wanted_ops(results: dict) -> set[int]:
    """The history indices explain() reads: the ops of the eos-duplicate examples."""
    examples = ((results.get("anomalies") or {}).get(ANOMALY) or {}).get("examples") or []
    return {i for example in examples for i in example.get("ops") or [] if isinstance(i, int)}


def log_path(run_dir: Path, slot: int) -> Path:
    """A client's log, as `gregor run` names it (harness/controller/run.py)."""
    return Path(run_dir) / "clients" / f"client-{slot}.log"


def explain_run(run_dir: Path, history: list[dict], results: dict, test: dict) -> list[dict]:
    """explain() with the logs of the clients the examples' ops ran in."""
    concurrency = test.get("concurrency")
    if not isinstance(concurrency, int) or concurrency < 1 or not wanted_ops(results):
        return []
    slots = {e["process"] % concurrency for e in history if isinstance(e.get("process"), int)}
    logs = {}
    for slot in sorted(slots):
        path = log_path(run_dir, slot)
        if path.is_file():
            with open(path, encoding="utf-8", errors="replace") as lines:
                logs[slot] = fetches_outside_assignment(lines)
    return explain(history, results, test.get("keys") or {}, concurrency, logs)


def explain(history: list[dict], results: dict, keys: dict, concurrency: int, stale: dict) -> list[dict]:
    """Each eos-duplicate example that a stale fetch explains: the input (key,
    value, offset), the process that copied it, its log, and the log's line.
    `stale`: slot -> fetches_outside_assignment() of that client's log."""
    by_index = {event.get("index"): event for event in history}
    found = []
    for example in ((results.get("anomalies") or {}).get(ANOMALY) or {}).get("examples") or []:
        shown = _explained(example, by_index, keys, concurrency, stale)
        if shown is not None:
            found.append({"finding": STALE_FETCH, "report": REPORT, "anomaly": ANOMALY, **shown})
    return found


def _explained(example: dict, by_index: dict, keys: dict, concurrency: int, stale: dict) -> dict | None:
    where, offset = keys.get(str(example.get("key"))), example.get("offset")
    if not isinstance(offset, int) or not isinstance(where, (list, tuple)) or len(where) != 2:
        return None
    partition = (str(where[0]), int(where[1]))
    for index in sorted(i for i in example.get("ops") or [] if isinstance(i, int)):
        process = (by_index.get(index) or {}).get("process")
        if not isinstance(process, int):
            continue
        slot = process % concurrency
        for fetched, at, line in stale.get(slot, []):
            if fetched == partition and at <= offset:
                return {
                    "key": example.get("key"),
                    "value": example.get("value"),
                    "offset": offset,
                    "process": process,
                    "log": f"clients/client-{slot}.log",
                    "fetched_from": at,
                    "line": line[:LINE_CHARS],
                }
    return None
