"""A consumer that loses a partition while its start offset is still being
looked up fetches that partition anyway, outside its assignment; when the
partition comes back at its committed offset, the records of that stale
fetch can still be handed to the application.

A finding about librdkafka (2.16.0 under confluent-kafka 2.16.1), met three
times in fault-free `eos` runs of the suite (README, "Known limits"): a
copier lost partition 1 0.1 s after it got it, librdkafka started fetching
it from offset 0 half a second later all the same, and when the partition
came back nine seconds later at its committed offset 220, the copier's next
poll still returned offsets 0 to 49, which it copied again.

Each trial uses a fresh topic of PARTITIONS partitions of RECORDS records and
a fresh group, in which nothing was ever committed:

1. consumer A (auto.offset.reset=earliest, eager `range` assignment, its
   heartbeat every --heartbeat-ms) subscribes alone and gets every partition;
   with no committed offset librdkafka looks each start offset up
   (ListOffsets) 100 ms later;
2. as soon as A has its partitions, consumer B (already connected) joins; A
   learns of the rebalance at its next heartbeat and gives every partition
   up, then gets half of them back. A lookup whose reply comes back after
   that is outdated, and librdkafka sets the partition's offset query timer
   again: half a second later it fetches the partition from offset 0,
   outside A's assignment, into the partition's own queue;
3. B holds its half for --hold seconds, commits offset COMMIT on each of its
   partitions, and leaves; A gets every partition again, at COMMIT. Starting
   a partition, librdkafka first moves what its queue holds (the stale
   fetch's records) into the consumer's queue, then raises the partition's
   version, which is what makes a poll drop older records. A poll that takes
   records from the queue between the two keeps them.
   `--scheduling realtime` (the default) makes that happen every time: A's
   polling thread runs at a real-time priority, on one CPU with all of
   librdkafka's threads, so it runs the moment the records are moved, before
   librdkafka's thread goes on. Any scheduler may run the threads in that
   order; on a busy machine it sometimes does. `--scheduling default` leaves
   the scheduling alone (the control);
4. A's librdkafka log (contexts cgrp, topic, fetch) shows every fetch it
   started outside its assignment, and whether an outdated ListOffsets reply
   set that partition's offset query timer again; A's polls show the first
   offset of each of B's partitions it was handed after step 3.

A correct A never fetches B's partitions while B has them, and starts each of
them at COMMIT once it has them back.

    sudo .venv/bin/python benchmarks/librdkafka_stale_fetch.py [--trials 10] [--scheduling realtime|default]

It needs root (a real-time priority). It brings its lab up (as `gregor lab up`
does) unless one of that name is running, and takes down only a lab it started.
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

from confluent_kafka import Consumer, TopicPartition, libversion, version  # noqa: E402

from benchmarks import client_trials  # noqa: E402
from benchmarks.client_trials import run, topic_of_records, trial_lab  # noqa: E402
from ground.errors import GregorError  # noqa: E402
from workloads.librdkafka_log import fetches_outside_assignment, outdated_offset_retries  # noqa: E402

PARTITIONS, RECORDS, COMMIT = 8, 300, 220
REALTIME_PRIORITY = 10  # SCHED_FIFO: above every thread librdkafka starts (SCHED_OTHER)
TRIAL_TIMEOUT_S = 40.0  # after B has left: A must have been handed each of B's partitions again


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    """Eager `range` assignment: a rebalance takes every partition away first (the eos copiers' own)."""
    return client_trials.consumer_config(bootstrap, group, **{"partition.assignment.strategy": "range", **extra})


class Holder(threading.Thread):
    """Consumer B: joins once started, holds what it gets, commits COMMIT on it, leaves."""

    def __init__(self, bootstrap: str, group: str, topic: str, hold_s: float):
        super().__init__(daemon=True)
        self.consumer = Consumer(consumer_config(bootstrap, group, **{"heartbeat.interval.ms": 1000}))
        self.consumer.list_topics(topic, timeout=10)  # connected before it joins
        self.topic, self.hold_s = topic, hold_s
        self.partitions: list[int] = []
        self.left = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # not A's priority, whose thread starts it
        try:
            got: list[int] = []
            self.consumer.subscribe([self.topic], on_assign=lambda _c, ps: got.extend(p.partition for p in ps))
            end = time.time() + 20
            while not got and time.time() < end:
                self.consumer.poll(0.05)
            if not got:
                self.error = "B was given no partition in 20 s"
                return
            self.partitions = sorted(got)
            end = time.time() + self.hold_s
            while time.time() < end:
                self.consumer.poll(0.1)
            offsets = [TopicPartition(self.topic, p, COMMIT) for p in self.partitions]
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as error:  # noqa: BLE001 - reported as the trial's outcome
            self.error = f"B failed: {error}"
        finally:
            self.consumer.close()
            self.left.set()


class Trial:
    """Consumer A and what it was handed, per generation of its assignment."""

    def __init__(self, bootstrap: str, log_path: str, hold_s: float, heartbeat_ms: int, realtime: bool):
        self.topic = topic_of_records(bootstrap, "stale", PARTITIONS, RECORDS)
        group = "stale-" + uuid.uuid4().hex[:8]
        self.log_path = log_path
        log = logging.getLogger(log_path)
        log.propagate = False
        self.log_file = logging.FileHandler(log_path, mode="w")
        self.log_file.setFormatter(logging.Formatter("%(created).3f %(message)s"))
        log.handlers = [self.log_file]
        log.setLevel(logging.DEBUG)
        debug = {"debug": "cgrp,topic,fetch", "logger": log, "heartbeat.interval.ms": heartbeat_ms}
        self.a = Consumer(consumer_config(bootstrap, group, **debug))
        self.b = Holder(bootstrap, group, self.topic, hold_s)
        self.realtime = realtime
        self.generation = 0
        self.first: dict[tuple[int, int], int] = {}  # (generation, partition) -> first offset handed to A

    def _assigned(self, _consumer, _partitions) -> None:
        self.generation += 1

    def _back(self) -> bool:
        """Whether A, after B left, has been handed a record of each of B's partitions."""
        return self.b.left.is_set() and all((self.generation, p) in self.first for p in self.b.partitions)

    def run(self) -> None:
        """A polls (at a real-time priority when asked) until it has B's partitions back."""
        if self.realtime:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
        try:
            self._poll()
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    def _poll(self) -> None:
        self.a.subscribe([self.topic], on_assign=self._assigned)
        deadline = None
        try:
            while not self._back():
                for message in self.a.consume(num_messages=50, timeout=0.05):
                    if not message.error():
                        self.first.setdefault((self.generation, message.partition()), message.offset())
                if self.generation >= 1 and not self.b.is_alive() and not self.b.left.is_set():
                    self.b.start()
                if self.b.left.is_set() and deadline is None:
                    deadline = time.time() + TRIAL_TIMEOUT_S
                if self.b.error or (deadline and time.time() > deadline):
                    break
        finally:
            self.a.close()
            self.log_file.close()
            self.b.join(30)

    def outcome(self) -> dict:
        with open(self.log_path, errors="replace") as handle:
            lines = handle.readlines()
        ours = {(self.topic, p) for p in self.b.partitions}
        outside = [(tp, offset) for tp, offset, _ in fetches_outside_assignment(lines) if tp in ours]
        retried = outdated_offset_retries(lines) & {tp for tp, _ in outside}
        handed = {p: self.first.get((self.generation, p)) for p in self.b.partitions}
        return {
            "error": self.b.error or (None if self._back() else "A was not handed B's partitions again in time"),
            "outside": sorted(outside),
            "after_outdated_reply": sorted(retried),
            "handed": handed,
            "below_commit": sorted(p for p, offset in handed.items() if offset is not None and offset < COMMIT),
        }


def one_cpu() -> None:
    """This thread, and every thread it starts from now on (librdkafka's too), on one CPU;
    a one-line error when the process may not take a real-time priority."""
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:
        raise GregorError("--scheduling realtime needs root (a real-time priority); run it with sudo") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--hold", type=float, default=3.0, help="seconds B holds its partitions (default 3)")
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=100,
        help="A's heartbeat.interval.ms (default 100: A learns of B's join when its lookups start)",
    )
    parser.add_argument(
        "--scheduling",
        choices=("realtime", "default"),
        default="realtime",
        help="realtime: A's polling thread above librdkafka's on one CPU (default); default: the control",
    )
    parser.add_argument("--lab", default="rep", help="lab name (default rep)")
    args = parser.parse_args()
    with trial_lab(args.lab) as lab:
        if args.scheduling == "realtime":
            one_cpu()  # after the lab is up: its brokers keep every CPU
        bootstrap = lab.bootstrap_servers
        print(
            f"confluent-kafka {version()}, librdkafka {libversion()[0]}; {PARTITIONS} partitions of {RECORDS} "
            f"records, B holds {args.hold} s and commits {COMMIT}; A's heartbeat {args.heartbeat_ms} ms; "
            f"scheduling {args.scheduling}",
            flush=True,
        )
        logs = tempfile.mkdtemp(prefix="stale-fetch-")
        outside = retried = below = failed = 0
        for n in range(args.trials):
            log_path = os.path.join(logs, f"trial-{n + 1}.log")
            trial = Trial(bootstrap, log_path, args.hold, args.heartbeat_ms, args.scheduling == "realtime")
            trial.run()
            result = trial.outcome()
            outside += bool(result["outside"])
            retried += bool(result["after_outdated_reply"])
            below += bool(result["below_commit"])
            failed += result["error"] is not None
            fetched = ", ".join(f"[{tp[1]}] from {offset}" for tp, offset in result["outside"]) or "none"
            print(
                f"trial {n + 1}: B had {trial.b.partitions}; fetched by A outside its assignment: {fetched}"
                f" ({len(result['after_outdated_reply'])} after an outdated ListOffsets reply); first offsets"
                f" handed to A once back: {result['handed']}"
                + (f"; BELOW {COMMIT}: {result['below_commit']}" if result["below_commit"] else "")
                + (f"; {result['error']}" if result["error"] else "")
                + f"; log {trial.log_path}",
                flush=True,
            )
        print(
            f"{outside} of {args.trials} trials: A fetched one of B's partitions outside its assignment "
            f"({retried} of them after an outdated ListOffsets reply); {below} of {args.trials}: A was handed "
            f"a record below the committed offset {COMMIT} once the partition was back"
            + (f"; {failed} trials did not finish" if failed else "")
        )
        return 0


if __name__ == "__main__":
    run(main)
