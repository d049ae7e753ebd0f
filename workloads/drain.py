"""The final drain: fresh eyes read every key from the beginning.

After the main phase a new consumer (its own process id, recorded like any
client) reads every key from offset 0 until its position has passed every
offset any client learned of (from sends and polls), or the drain time limit
passes. Without it, a record acknowledged late in the run would look lost
only because nobody had read it yet.

A key whose log ends below an offset some client learned of (a leader that
acknowledged records and lost them to a truncation) will never get there:
once the drain has read that key to its end and the end has stayed put for
TRUNCATION_GRACE_S, it stops waiting for the key, says so, and records what
it saw on its poll completion (`truncated`, docs/SCENARIOS.md), so that the
loss is evidence rather than a drain that timed out.

`gregor run` runs it in a child process (workloads/guarded_drain.py), so
that a consumer call that never returns cannot hang the run.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

from workloads.kafka_client import OFFSET_BEGINNING, Consumer, KafkaException
from workloads.kafka_io import KeyMap, read_messages

TRUNCATION_GRACE_S = 8.0  # a new leader's high watermark catches up within a few fetches


class TruncationWatch:
    """Keys whose log end stays below the offset the drain waits for.

    `see(key, position, end, target, now)` is called after each poll with the
    consumer's position and the partition's end (high watermark); it returns
    what was seen once the drain has read everything there is (position at
    the end), the end is at or below the target, and neither moved for
    `grace_s` seconds.
    """

    def __init__(self, grace_s: float = TRUNCATION_GRACE_S):
        self.grace_s = grace_s
        self.since: dict[int, tuple[int, float]] = {}  # key -> (end, first seen)

    def see(self, key: int, position: int | None, end: int | None, target: int, now: float) -> dict | None:
        if position is None or end is None or position < end or end > target:
            self.since.pop(key, None)
            return None
        first = self.since.get(key)
        if first is None or first[0] != end:
            self.since[key] = (end, now)
            return None
        if now - first[1] < self.grace_s:
            return None
        return {"key": key, "end_offset": end, "acked_offset": target, "waited_s": round(now - first[1], 3)}


class OffsetsLearned:
    """The highest offset per key that any completion mentions."""

    def __init__(self):
        self.highest: dict[int, int] = {}

    def observe(self, event: dict) -> None:
        if event.get("type") == "invoke":
            return
        for mop in event.get("mops") or ():
            offset = mop.get("offset")
            if offset is not None and mop.get("f") in ("send", "poll"):
                key = mop["key"]
                if offset > self.highest.get(key, -1):
                    self.highest[key] = offset


def _librdkafka_logger(log_path: str | None) -> dict:
    """Sends librdkafka's log (connection refusals of brokers still down or
    cut) to a file beside the clients' logs instead of the user's terminal."""
    if not log_path:
        return {}
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    logger = logging.getLogger(f"gregor.drain.{log_path}")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.FileHandler(log_path))
    return {"logger": logger}


def drain(
    writer,
    key_map: dict,
    bootstrap: str,
    targets: dict[int, int],
    process: int,
    isolation: str,
    time_limit_s: float,
    progress=print,
    log_path: str | None = None,
    client_config: dict | None = None,
    beat=None,
    report=None,
) -> dict:
    """Reads until every target offset is passed; returns the test.json "drain" field.

    `beat(waiting)` is called between consumer calls with the keys still
    behind (key -> target), so that whoever runs this in a child process can
    tell a slow drain from a wedged one (workloads/guarded_drain.py).
    `report(result)` gets the result before the consumer is closed, since
    closing can block where reading did not."""
    keymap = KeyMap(key_map)
    keys = sorted(keymap.by_key)
    consumer = Consumer(
        {
            **(client_config or {}),  # the lab's client settings (security)
            "bootstrap.servers": bootstrap,
            "group.id": f"gregor-drain-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
        },
        **_librdkafka_logger(log_path),
    )
    started = time.monotonic()
    end = started + time_limit_s
    reads = 0
    try:
        writer.record({"process": process, "type": "invoke", "f": "assign", "keys": keys})
        consumer.assign([keymap.tp(k, OFFSET_BEGINNING) for k in keys])
        writer.record({"process": process, "type": "ok", "f": "assign", "keys": keys})
        waiting = {k: o for k, o in targets.items() if k in keymap.by_key}
        watch = TruncationWatch()
        truncated: list[dict] = []
        last_report = started
        while waiting and time.monotonic() < end:
            if beat:
                beat(waiting)
            writer.record({"process": process, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]})
            try:
                messages = consumer.consume(num_messages=2000, timeout=0.5)
            except KafkaException as exc:
                writer.record(
                    {
                        "process": process,
                        "type": "fail",
                        "f": "poll",
                        "mops": [],
                        "error": exc.args[0].name() if exc.args else "error",
                    }
                )
                continue
            mops, _ = read_messages(messages, keymap)
            reads += len(mops)
            seen = passed_or_truncated(consumer, keymap, waiting, watch, idle=not mops, beat=beat)
            completion = {"process": process, "type": "ok", "f": "poll", "mops": mops}
            if seen:
                completion["truncated"] = seen
                truncated += seen
            writer.record(completion)
            for found in seen:
                if progress:
                    topic, partition = keymap.by_key[found["key"]]
                    progress(
                        f"drain: key {found['key']} ({topic}-{partition}) ends at offset "
                        f"{found['end_offset']}, below the acknowledged offset "
                        f"{found['acked_offset']}: truncated; not waiting for it"
                    )
            if progress and time.monotonic() - last_report > 5:
                progress(f"drain: {reads} records read, {len(waiting)} key(s) still behind")
                last_report = time.monotonic()
        result = {
            "time_limit_s": time_limit_s,
            "complete": not waiting,
            "process": process,
            "seconds": round(time.monotonic() - started, 3),
            "records": reads,
        }
        if waiting:
            result["behind"] = {str(k): o for k, o in sorted(waiting.items())}
        if truncated:
            result["truncated"] = {str(t["key"]): {n: v for n, v in t.items() if n != "key"} for t in truncated}
        if report:
            report(result)
    finally:
        consumer.close()
    return result


def passed_or_truncated(
    consumer, keymap: KeyMap, waiting: dict[int, int], watch: TruncationWatch, idle: bool, beat=None
) -> list[dict]:
    """Drops from `waiting` the keys the consumer has read past their target,
    and, after a poll that read nothing (idle), those whose log ended below
    it; returns what was seen of the latter."""
    try:
        positions = consumer.position([keymap.tp(k) for k in waiting])
    except KafkaException:
        return []
    seen = []
    for tp in positions:
        key = keymap.key_of(tp.topic, tp.partition)
        if key not in waiting:
            continue
        if tp.offset is not None and tp.offset > waiting[key]:
            del waiting[key]
        elif idle:
            if beat:
                beat(waiting)  # each query may take its whole timeout
            low, high = _log_bounds(consumer, tp)
            position = _offset(tp.offset)
            if position is None and high is not None and high == low:
                position = high  # an empty log: nothing to read, nothing was
            found = watch.see(key, position, high, waiting[key], time.monotonic())
            if found is not None:
                del waiting[key]
                seen.append(found)
    return seen


def _offset(value) -> int | None:
    return value if value is not None and value >= 0 else None


def _log_bounds(consumer, tp) -> tuple[int | None, int | None]:
    """The partition's start and end (high watermark) as its leader reports
    them now; None where unknown (no leader)."""
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=2, cached=False)
    except KafkaException:
        return None, None
    return _offset(low), _offset(high)
