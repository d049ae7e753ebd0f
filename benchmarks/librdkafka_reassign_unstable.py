"""Does a consumer given a partition again, while a transaction holds its
group's offset, start that partition from auto.offset.reset?

A finding about librdkafka (2.16.0 under confluent-kafka 2.16.1), measured
on a real lab; README "Known limits" and docs/SYSTEMS.md tell the story.

Each trial uses a fresh group on a two-partition topic of 300 records each:

1. the group commits offset LOW (100) for both partitions, a stable commit;
2. a transactional producer sends offset HIGH (200) for both in a
   transaction and keeps it open 6.5 s, so a read_committed consumer's
   OffsetFetch (require_stable) is answered UNSTABLE_OFFSET_COMMIT, and
   librdkafka retries it;
3. consumer B (read_committed, auto.offset.reset=earliest) gets the
   partitions, and then, while that OffsetFetch is still retried, gets some
   of them again:
   - `--how join` (default): B subscribes alone, and 1.5 s later consumer C
     joins the group; the eager rebalance revokes B's partitions and gives
     one back to it;
   - `--how assign`: B calls assign() with both partitions, and again 0.3 s
     later;
   - `--how once`: the control, nothing happens to B's assignment;
4. the transaction commits; each partition's first record read by B is
   printed.

A correct B starts each partition at LOW or HIGH, never at 0.

    sudo .venv/bin/python benchmarks/librdkafka_reassign_unstable.py [--how join|assign|once] [--trials 5] [--lab rep]

It brings its lab up (as `gregor lab up` does) unless one of that name is
running, and takes down only a lab it started.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition, libversion, version  # noqa: E402

from benchmarks import client_trials  # noqa: E402
from benchmarks.client_trials import run, topic_of_records, trial_lab  # noqa: E402

LOW, HIGH, RECORDS, PARTITIONS = 100, 200, 300, 2
HOLD_S = 6.5  # how long the transaction holds the offsets


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    return client_trials.consumer_config(
        bootstrap, group, **{"enable.partition.eof": False, "heartbeat.interval.ms": 1000, **extra}
    )


class Reader:
    """Consumer B: polls, and keeps each partition's first offset read."""

    def __init__(self, bootstrap: str, group: str, log_path: str):
        log = logging.getLogger(log_path)
        log.propagate = False
        self.log_file = logging.FileHandler(log_path, mode="w")
        log.handlers = [self.log_file]
        log.setLevel(logging.DEBUG)
        self.consumer = Consumer(consumer_config(bootstrap, group, debug="cgrp", logger=log))
        self.first: dict[int, int] = {}
        self.events: list[str] = []

    def on_assign(self, _consumer, partitions) -> None:
        self.events.append(f"assigned {[p.partition for p in partitions]}")

    def on_revoke(self, _consumer, partitions) -> None:
        self.events.append(f"revoked {[p.partition for p in partitions]}")

    def poll_for(self, seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            message = self.consumer.poll(0.05)
            if message is not None and not message.error():
                self.first.setdefault(message.partition(), message.offset())


def joiner(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    """Consumer C: joins the group and stays until told to stop."""
    consumer = Consumer(consumer_config(bootstrap, group))
    consumer.subscribe([topic])
    while not stop.is_set():
        consumer.poll(0.1)
    consumer.close()


def trial(bootstrap: str, topic: str, how: str, log_path: str) -> Reader:
    group = "reassign-" + uuid.uuid4().hex[:8]
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    committer = Consumer(consumer_config(bootstrap, group))
    committer.commit(offsets=[TopicPartition(topic, p, LOW) for p in range(PARTITIONS)], asynchronous=False)
    holder = Producer({"bootstrap.servers": bootstrap, "transactional.id": group + "-holder"})
    holder.init_transactions(30)
    holder.begin_transaction()
    holder.send_offsets_to_transaction(
        [TopicPartition(topic, p, HIGH) for p in range(PARTITIONS)], committer.consumer_group_metadata(), 30
    )
    reader = Reader(bootstrap, group, log_path)
    stop = threading.Event()
    c = threading.Thread(target=joiner, args=(bootstrap, group, topic, stop))
    try:
        if how == "assign":
            reader.consumer.assign(partitions)
            reader.poll_for(0.3)
            reader.consumer.assign(partitions)
            reader.events.append("assign() twice")
        else:
            reader.consumer.subscribe([topic], on_assign=reader.on_assign, on_revoke=reader.on_revoke)
            reader.poll_for(1.5)
            if how == "join":
                c.start()
        reader.poll_for(HOLD_S - 1.5)
        holder.commit_transaction(30)
        reader.poll_for(4.0)
        return reader
    finally:
        stop.set()
        if c.is_alive():
            c.join()
        reader.consumer.close()
        reader.log_file.close()
        committer.close()


def started_at_invalid(log_path: str) -> bool:
    """Whether librdkafka's log shows the path: an UNSTABLE answer put back
    on the pending list, then a partition started at offset INVALID."""
    text = Path(log_path).read_text(errors="replace")
    unstable = text.find("back to pending list because on-going transaction")
    return unstable >= 0 and "at offset INVALID" in text[unstable:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--how",
        choices=("join", "assign", "once"),
        default="join",
        help="how B gets its partitions again (once: the control)",
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--lab", default="rep", help="lab name (default rep)")
    args = parser.parse_args()
    with trial_lab(args.lab) as lab:
        bootstrap = lab.bootstrap_servers
        print(f"confluent-kafka {version()}, librdkafka {libversion()[0]}; --how {args.how}", flush=True)
        topic = topic_of_records(bootstrap, "reassign", PARTITIONS, RECORDS)
        logs = tempfile.mkdtemp(prefix="reassign-")
        wrong = 0
        for n in range(args.trials):
            log_path = os.path.join(logs, f"trial-{n + 1}.log")
            reader = trial(bootstrap, topic, args.how, log_path)
            bad = not reader.first or any(o not in (LOW, HIGH) for o in reader.first.values())
            wrong += bad
            path = (
                "an UNSTABLE answer put back as pending, then started at INVALID"
                if started_at_invalid(log_path)
                else "no start at INVALID in the log"
            )
            print(
                f"trial {n + 1}: first offsets {dict(sorted(reader.first.items()))} "
                f"({'WRONG' if bad else 'ok'}; {', '.join(reader.events)}; "
                f"{path}; log {log_path})",
                flush=True,
            )
        print(f"{wrong} of {args.trials} trials read a partition from outside the committed offsets {LOW} and {HIGH}")
        return 0


if __name__ == "__main__":
    run(main)
