"""The final drain: fresh eyes read every key from the beginning.

After the main phase a new consumer (its own process id, recorded like any
client) reads every key from offset 0 until its position has passed every
offset any client learned of (from sends and polls), or the drain time limit
passes. Without it, a record acknowledged late in the run would look lost
only because nobody had read it yet.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException

from workloads.kafka_io import KeyMap, read_messages


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


def drain(writer, key_map: dict, bootstrap: str, targets: dict[int, int], process: int,
          isolation: str, time_limit_s: float, progress=print, log_path: str | None = None,
          client_config: dict | None = None) -> dict:
    """Reads until every target offset is passed; returns the test.json "drain" field."""
    keymap = KeyMap(key_map)
    keys = sorted(keymap.by_key)
    consumer = Consumer({
        **(client_config or {}),   # the lab's client settings (security)
        "bootstrap.servers": bootstrap,
        "group.id": f"gregor-drain-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    }, **_librdkafka_logger(log_path))
    started = time.monotonic()
    end = started + time_limit_s
    reads = 0
    try:
        writer.record({"process": process, "type": "invoke", "f": "assign", "keys": keys})
        consumer.assign([keymap.tp(k, OFFSET_BEGINNING) for k in keys])
        writer.record({"process": process, "type": "ok", "f": "assign", "keys": keys})
        waiting = {k: o for k, o in targets.items() if k in keymap.by_key}
        last_report = started
        while waiting and time.monotonic() < end:
            writer.record({"process": process, "type": "invoke", "f": "poll",
                           "mops": [{"f": "poll"}]})
            try:
                messages = consumer.consume(num_messages=2000, timeout=0.5)
            except KafkaException as exc:
                writer.record({"process": process, "type": "fail", "f": "poll", "mops": [],
                               "error": exc.args[0].name() if exc.args else "error"})
                continue
            mops, _ = read_messages(messages, keymap)
            writer.record({"process": process, "type": "ok", "f": "poll", "mops": mops})
            reads += len(mops)
            try:
                positions = consumer.position([keymap.tp(k) for k in waiting])
            except KafkaException:
                positions = []
            for tp in positions:
                key = keymap.key_of(tp.topic, tp.partition)
                if key in waiting and tp.offset is not None and tp.offset > waiting[key]:
                    del waiting[key]
            if progress and time.monotonic() - last_report > 5:
                progress(f"drain: {reads} records read, {len(waiting)} key(s) still behind")
                last_report = time.monotonic()
        complete = not waiting
    finally:
        consumer.close()
    result = {"time_limit_s": time_limit_s, "complete": complete, "process": process,
              "seconds": round(time.monotonic() - started, 3), "records": reads}
    if not complete:
        result["behind"] = {str(k): o for k, o in sorted(waiting.items())}
    return result
