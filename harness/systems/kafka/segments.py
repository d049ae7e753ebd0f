"""The broker's own record of the partitions anomalies name: their segment files, dumped.

Why: a claim about a lost, aborted or duplicated record is settled by what
each replica's log holds (producer id, epoch, sequences, the transactional
flag, the COMMIT/ABORT markers), not by what a client believed. Kafka's
DumpLogSegments (--deep-iteration --print-data-log, dump_tool.py) prints
every batch and record of a segment; this module runs it once per node over
the wanted partitions' segments and keeps the batches near the named offsets,
plus the control batch that ended each of their transactions. Record keys
and values are the clients' bytes as the tool prints them: untrusted text.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

from harness.systems.kafka import dump_tool

SOURCE = "each replica's segment files, printed by Kafka's DumpLogSegments (--deep-iteration --print-data-log)"
FLAGS = ["--deep-iteration", "--print-data-log"]
WINDOW = 20  # offsets kept either side of each named offset
MAX_PARTITIONS = 20
MAX_RECORDS = 50  # records kept per batch
MAX_TEXT = 200  # characters kept of a record's key or value

_BATCH_FIELDS = {
    "baseOffset": ("base_offset", int),
    "lastOffset": ("last_offset", int),
    "count": ("count", int),
    "producerId": ("producer_id", int),
    "producerEpoch": ("producer_epoch", int),
    "baseSequence": ("base_sequence", int),
    "lastSequence": ("last_sequence", int),
    "partitionLeaderEpoch": ("leader_epoch", int),
    "isTransactional": ("transactional", lambda text: text == "true"),
    "isControl": ("control", lambda text: text == "true"),
}


def _pairs(text: str) -> dict[str, str]:
    """'a: 1 b: x' -> {"a": "1", "b": "x"} (single-word values)."""
    words = text.split(" ")
    return {words[i][:-1]: words[i + 1] for i in range(len(words) - 1) if words[i].endswith(":")}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"... ({len(text)} characters)"


def parse_record(line: str) -> dict:
    """One '| offset: ...' line: offset, sequence, and key/value text or the control marker."""
    head, has_headers, rest = line[2:].partition(" headerKeys: ")
    fields = _pairs(head)
    record: dict = {"offset": int(fields["offset"])}
    if "sequence" in fields:
        record["sequence"] = int(fields["sequence"])
    if not has_headers:
        return record
    if rest.startswith("[") and "] " in rest:  # header keys: printed, not kept
        rest = rest[rest.index("] ") + 2 :]
    if rest.startswith("endTxnMarker: "):
        marker = _pairs(rest)
        record["marker"] = marker.get("endTxnMarker")
        if "coordinatorEpoch" in marker:
            record["coordinator_epoch"] = int(marker["coordinatorEpoch"])
        return record
    if rest.startswith("key: "):
        size = int(fields.get("keySize", -1))
        body = rest[len("key: ") :]
        if 0 <= size <= len(body) and body[size:].startswith(" payload: "):
            key, value = body[:size], body[size + len(" payload: ") :]
        else:
            key, _, value = body.partition(" payload: ")
        record["key"] = _clip(key)
        record["value"] = _clip(value)
    elif rest.startswith("payload: "):
        record["value"] = _clip(rest[len("payload: ") :])
    return record


def parse_batch(line: str) -> dict:
    """One 'baseOffset: ...' line, typed."""
    fields = _pairs(line)
    batch = {name: convert(fields[word]) for word, (name, convert) in _BATCH_FIELDS.items() if word in fields}
    batch["records"] = []
    return batch


def parse(text: str, keep=None) -> dict[str, dict]:
    """Per dumped file: its log start offset, how many batches it holds and its
    batches (with records) for which keep(batch) is true (all without `keep`)."""
    files: dict[str, dict] = {}
    current: dict | None = None
    batch: dict | None = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = files.setdefault(line[len("Dumping ") :].strip(), {"batches": [], "batches_in_file": 0})
            batch = None
        elif current is None:
            continue
        elif line.startswith("Log starting offset: "):
            current["log_start_offset"] = int(line.rsplit(" ", 1)[1])
        elif line.startswith("baseOffset: "):
            batch = parse_batch(line)
            current["batches_in_file"] += 1
            current["first_offset"] = min(current.get("first_offset", batch["base_offset"]), batch["base_offset"])
            current["last_offset"] = max(current.get("last_offset", batch["last_offset"]), batch["last_offset"])
            if keep is None or keep(batch):
                current["batches"].append(batch)
            else:
                batch = None
        elif line.startswith("| offset: ") and batch is not None:
            record = parse_record(line)
            if batch.get("control") and "marker" in record:
                batch["marker"] = record["marker"]
            if len(batch["records"]) < MAX_RECORDS:
                batch["records"].append(record)
            else:
                batch["records_left_out"] = batch.get("records_left_out", 0) + 1
    return files


def partition_of(path: str) -> tuple[str, int]:
    """(topic, partition) of a segment file, from its directory name 'topic-N'."""
    topic, _, number = PurePosixPath(path).parent.name.rpartition("-")
    return topic, int(number)


def _within(offsets: list[int], window: int):
    """Whether a batch holds an offset within `window` of a named one."""
    ranges = [(o - window, o + window) for o in offsets]
    return lambda batch: any(batch["base_offset"] <= high and batch["last_offset"] >= low for low, high in ranges)


def near(offsets: list[int], window: int = WINDOW):
    """A keep() for parse: batches within `window` of a named offset, and every control
    batch (the one ending a kept transaction may lie far after it; trim drops the rest)."""
    within = _within(offsets, window)
    return lambda batch: bool(batch.get("control")) or within(batch)


def ending_marker(batches: list[dict], batch: dict) -> dict | None:
    """The control batch that ended a transactional batch's transaction: its producer's
    first control batch after it (None while the transaction is open)."""
    if not batch.get("transactional") or batch.get("control"):
        return None
    for later in batches:
        if (
            later.get("control")
            and later["producer_id"] == batch["producer_id"]
            and later["base_offset"] > batch["last_offset"]
        ):
            return later
    return None


def trim(batches: list[dict], offsets: list[int], window: int = WINDOW) -> list[dict]:
    """The batches within `window` of a named offset, and the marker ending each of their
    transactions (wherever it is): the other control batches parse kept are dropped."""
    within = _within(offsets, window)
    kept = [b for b in batches if within(b)]
    ids = {id(b) for b in kept}
    for batch in kept:
        marker = ending_marker(batches, batch)
        if marker is not None:
            ids.add(id(marker))
    return [b for b in batches if id(b) in ids]


def dump_node(system, node, wanted: dict[tuple[str, int], list[int]], window: int = WINDOW) -> dict:
    """On one node: per 'topic-partition' its replica's files, log start and end, and the
    batches near the named offsets ({"error"} for the node when the dump fails)."""
    started = time.monotonic()
    globs = [f"{topic}-{partition}" for topic, partition in wanted]
    files = dump_tool.log_files(system, node, globs)
    offsets: dict[tuple[str, int], list[int]] = {where: list(found) for where, found in wanted.items()}
    every_offset = [o for found in offsets.values() for o in found]
    parsed = parse(dump_tool.run(system, node, files, FLAGS), near(every_offset, window)) if files else {}
    replicas: dict[str, dict] = {}
    for path, found in parsed.items():
        where = partition_of(path)
        replica = replicas.setdefault(
            f"{where[0]}-{where[1]}", {"files": [], "batches": [], "batches_in_log": 0, "log_start_offset": None}
        )
        replica["files"].append(path)
        replica["batches_in_log"] += found["batches_in_file"]
        if replica["log_start_offset"] is None:
            replica["log_start_offset"] = found.get("log_start_offset")
        if "last_offset" in found:
            replica["log_end_offset"] = max(replica.get("log_end_offset", 0), found["last_offset"] + 1)
        replica["batches"].extend(found["batches"])
    for (topic, partition), named in offsets.items():
        replica = replicas.get(f"{topic}-{partition}")
        if replica is not None:
            replica["batches"] = trim(replica["batches"], named, window)
    return {"seconds": round(time.monotonic() - started, 3), "replicas": replicas}


def collect(system, lab, wanted: dict[tuple[str, int], list[int]], window: int = WINDOW) -> dict:
    """Every broker node's dump of the wanted partitions, in parallel: the "nodes" of
    evidence/segments.json. A node whose dump fails says why and the others still count."""
    nodes = [lab.node(name) for name in system.broker_nodes_names()]

    def one(node) -> tuple[str, dict]:
        try:
            return node.name, dump_node(system, node, wanted, window)
        except Exception as error:  # one node's failure must not cost the others
            said = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            return node.name, {"error": said}

    with ThreadPoolExecutor(max_workers=max(1, len(nodes)), thread_name_prefix="gregor-segments") as pool:
        return dict(pool.map(one, nodes))
