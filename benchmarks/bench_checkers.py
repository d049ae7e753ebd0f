"""Benchmark of the full check (`check_dir`) on synthetic histories.

Generates histories of N events (default 100,000, 1 million and 10 million)
with a few planted anomalies, checks each with local Spark, and prints
events per second, peak memory (driver RSS + Spark JVM RSS, sampled),
whether every planted anomaly was found, Spark's floor on the same history
(a parse, and a parse plus one shuffle) and the check's share of that
floor. Histories up to 2M events are then checked again three times in
the same, now warm, session, each time after timing the floor again, and
the summary compares the medians: a new session's first check is not warm.
A summary table at the end has one line per size. Goals (issue 13,
2 cores): >= 100,000 events/s at 10M, >= 40% of the floor at every size,
peak memory flat from 1M to 10M.

    .venv/bin/python benchmarks/bench_checkers.py
    .venv/bin/python benchmarks/bench_checkers.py --events 100000 --events 1000000
    .venv/bin/python benchmarks/bench_checkers.py --small

--small measures small runs instead: `gregor check` on a 5,000-event history
as a new process (wall time, Spark start included; the Spark start alone is
timed separately), the same check in a warm session, and 200 small checks
in one session with the driver's JVM heap in use (after a full GC) before
and after.

The generator streams lines straight to disk (no history in memory): keys
are consumed by one consumer each, in order, in batches; producers send
single records or two-key transactions (whose commit markers leave offset
gaps); two ops are always in flight at once. Planted, each on its own key:
lost-write and duplicate (from a few thousand events on, so the small runs
come out invalid), and from about 30,000 events on aborted-read,
nonmonotonic-poll, and a G1c cycle of two transactions that read each
other's writes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KEYS = 64
PRODUCERS = 8
CONSUMERS = 8
CONSUMER_BASE = 100
MS = 1_000_000
LOST_KEY, DUP_KEY, ABORT_KEY, NONMONO_KEY, CYCLE_A, CYCLE_B = 1, 2, 3, 4, 5, 6


class Generator:
    """Writes a valid history with the planted anomalies, line by line."""

    def __init__(self, out, target_events: int, seed: int = 7):
        self.out = out
        self.rng = random.Random(seed)
        self.target = target_events
        self.index = 0
        self.time = 0
        self.next_offset = [0] * KEYS
        self.next_value = [0] * KEYS
        self.pending = [collections.deque() for _ in range(KEYS)]  # (offset, value) unread
        self.sends_on = [0] * KEYS
        self.planted: dict[str, dict] = {}
        self.held: list[tuple[str, str]] = []  # ops waiting to be interleaved
        self.first_read: tuple[int, int] | None = None

    # -- writing
    def _line(self, body: str) -> None:
        self.time += self.rng.randint(1, 2) * MS // 2
        self.out.write(f'{{"index":{self.index},"time":{self.time},{body}}}\n')
        self.index += 1

    def op(self, invoke: str, completion: str) -> None:
        """Queues an op; two queued ops of different processes are written
        overlapping (one process never has two ops in flight)."""
        process = invoke.split(",", 1)[0]
        if self.held and self.held[0][0].split(",", 1)[0] == process:
            self.flush()
        self.held.append((invoke, completion))
        if len(self.held) == 2:
            self.flush()

    def flush(self) -> None:
        for invoke, _ in self.held:
            self._line(invoke)
        for _, completion in self.held:
            self._line(completion)
        self.held = []

    # -- the workload
    def _record(self, key: int) -> tuple[int, int]:
        self.next_value[key] += 1
        offset = self.next_offset[key]
        self.next_offset[key] += 1
        return offset, self.next_value[key]

    def send(self, process: int) -> None:
        key = self.rng.randrange(KEYS)
        offset, value = self._record(key)
        self.sends_on[key] += 1
        self.pending[key].append((offset, value))
        self.op(
            f'"process":{process},"type":"invoke","f":"send","mops":[{{"f":"send","key":{key},"value":{value}}}]',
            f'"process":{process},"type":"ok","f":"send","mops":[{{"f":"send","key":{key},"value":{value},"offset":{offset}}}]',
        )
        if key == LOST_KEY and self.sends_on[key] == 10:
            self.pending[key].pop()  # no consumer will ever read it
            self.planted["lost-write"] = {"key": key, "value": value}
        if key == DUP_KEY and self.sends_on[key] == 10:
            # The broker wrote the record twice: a second offset, same value.
            offset2 = self.next_offset[key]
            self.next_offset[key] += 1
            self.pending[key].append((offset2, value))
            self.planted["duplicate"] = {"key": key, "value": value}

    def txn(self, process: int) -> None:
        a, b = self.rng.sample(range(KEYS), 2)
        mops_in, mops_ok = [], []
        for key in (a, b):
            offset, value = self._record(key)
            self.sends_on[key] += 1
            self.pending[key].append((offset, value))
            mops_in.append(f'{{"f":"send","key":{key},"value":{value}}}')
            mops_ok.append(f'{{"f":"send","key":{key},"value":{value},"offset":{offset}}}')
            self.next_offset[key] += 1  # the commit marker's offset
        txn_id = f'"txn_id":"tx-{process}"'
        self.op(
            f'"process":{process},"type":"invoke","f":"txn",{txn_id},"mops":[{",".join(mops_in)}]',
            f'"process":{process},"type":"ok","f":"txn",{txn_id},"mops":[{",".join(mops_ok)}]',
        )

    def aborted(self, process: int) -> None:
        """An aborted transaction whose record a consumer nevertheless returns."""
        offset, value = self._record(ABORT_KEY)
        self.next_offset[ABORT_KEY] += 1  # abort marker
        self.pending[ABORT_KEY].append((offset, value))
        txn_id = f'"txn_id":"tx-{process}"'
        mop = f'{{"f":"send","key":{ABORT_KEY},"value":{value}}}'
        self.op(
            f'"process":{process},"type":"invoke","f":"txn",{txn_id},"mops":[{mop}]',
            f'"process":{process},"type":"fail","f":"txn",{txn_id},"error":"ABORTED","mops":[{mop}]',
        )
        self.planted["aborted-read"] = {"key": ABORT_KEY, "value": value}

    def cycle(self) -> None:
        """Two transactions, each reading the other's write: G1c (wr edges only)."""
        self.flush()
        (oa, va), (ob, vb) = self._record(CYCLE_A), self._record(CYCLE_B)
        self.pending[CYCLE_A].append((oa, va))
        self.pending[CYCLE_B].append((ob, vb))
        p1, p2 = 0, 1
        first = self.index
        self._line(
            f'"process":{p1},"type":"invoke","f":"txn","txn_id":"tx-{p1}","mops":[{{"f":"send","key":{CYCLE_A},"value":{va}}},{{"f":"poll"}}]'
        )
        self._line(
            f'"process":{p2},"type":"invoke","f":"txn","txn_id":"tx-{p2}","mops":[{{"f":"send","key":{CYCLE_B},"value":{vb}}},{{"f":"poll"}}]'
        )
        self._line(
            f'"process":{p1},"type":"ok","f":"txn","txn_id":"tx-{p1}","mops":[{{"f":"send","key":{CYCLE_A},"value":{va},"offset":{oa}}},{{"f":"poll","key":{CYCLE_B},"offset":{ob},"value":{vb}}}]'
        )
        self._line(
            f'"process":{p2},"type":"ok","f":"txn","txn_id":"tx-{p2}","mops":[{{"f":"send","key":{CYCLE_B},"value":{vb},"offset":{ob}}},{{"f":"poll","key":{CYCLE_A},"offset":{oa},"value":{va}}}]'
        )
        self.planted["G1c"] = {"ops": [first + 2, first + 3]}

    def poll(self, consumer: int, batch: int) -> bool:
        """One poll of the consumer's keys; False when it had nothing to read."""
        process = CONSUMER_BASE + consumer
        mops = []
        for key in range(consumer, KEYS, CONSUMERS):
            queue = self.pending[key]
            for _ in range(min(batch, len(queue))):
                offset, value = queue.popleft()
                mops.append(f'{{"f":"poll","key":{key},"offset":{offset},"value":{value}}}')
                if key == NONMONO_KEY and self.first_read is None:
                    self.first_read = (offset, value)
        if not mops:
            return False
        self.op(
            f'"process":{process},"type":"invoke","f":"poll","mops":[{{"f":"poll"}}]',
            f'"process":{process},"type":"ok","f":"poll","mops":[{",".join(mops)}]',
        )
        if (
            consumer == NONMONO_KEY % CONSUMERS
            and self.first_read is not None
            and "nonmonotonic-poll" not in self.planted
            and self.sends_on[NONMONO_KEY] > 40
        ):
            # A later poll returns the first record again: the position goes back.
            offset, value = self.first_read
            replay = f'{{"f":"poll","key":{NONMONO_KEY},"offset":{offset},"value":{value}}}'
            self.op(
                f'"process":{process},"type":"invoke","f":"poll","mops":[{{"f":"poll"}}]',
                f'"process":{process},"type":"ok","f":"poll","mops":[{replay}]',
            )
            self.planted["nonmonotonic-poll"] = {"key": NONMONO_KEY, "value": value}
        return True

    def run(self) -> None:
        for consumer in range(CONSUMERS):
            keys = ",".join(str(k) for k in range(consumer, KEYS, CONSUMERS))
            process = CONSUMER_BASE + consumer
            self.op(
                f'"process":{process},"type":"invoke","f":"assign","keys":[{keys}]',
                f'"process":{process},"type":"ok","f":"assign","keys":[{keys}]',
            )
        budget = self.target - 4 * KEYS  # room for the drain
        step = 0
        while self.index < budget:
            step += 1
            roll = self.rng.random()
            if step == 5000:
                self.aborted(2)
            elif step == 7000:
                self.cycle()
            elif roll < 0.45:
                self.send(self.rng.randrange(PRODUCERS))
            elif roll < 0.55:
                self.txn(self.rng.randrange(PRODUCERS))
            else:
                self.poll(self.rng.randrange(CONSUMERS), 4)
        # Drain: every consumer reads what is left.
        while any([self.poll(c, 200) for c in range(CONSUMERS)]):
            pass
        self.flush()


def generate(directory: Path, events: int, seed: int = 7) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "history.jsonl", "w", buffering=1 << 20) as out:
        gen = Generator(out, events, seed)
        gen.run()
    test = {
        "name": "bench-checkers",
        "system": "synthetic",
        "workload": "txn",
        "seed": seed,
        "concurrency": PRODUCERS + CONSUMERS,
        "keys": {str(k): ["bench", k] for k in range(KEYS)},
        "client": {
            "acks": "all",
            "enable.idempotence": True,
            "isolation.level": "read_committed",
            "transactional": True,
            "auto.commit": False,
            "subscribe": False,
            "transaction.timeout.ms": 600000,
        },
        "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "replication.factor": 3},
        "drain": {"complete": True},
    }
    (directory / "test.json").write_text(json.dumps(test))
    return {"events": gen.index, "planted": gen.planted}


# -------------------------------------------------------------- memory


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    """Every descendant of pid (the Spark JVM and its Python workers)."""
    parents = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                parents[ppid].append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _is_jvm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip() == "java"
    except OSError:
        return False


class PeakMemory:
    """Samples driver + Spark JVM (+ workers) RSS twice a second; keeps the
    peak of the sum and of each part (the JVM, its Python workers)."""

    def __init__(self):
        self.peak_total = self.peak_driver = self.peak_jvm = self.peak_jvm_only = self.peak_workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = os.getpid()
        while not self._stop.is_set():
            driver = _rss_kib(me)
            children = _children(me)
            jvm = sum(_rss_kib(p) for p in children if _is_jvm(p))
            others = sum(_rss_kib(p) for p in children)
            self.peak_driver = max(self.peak_driver, driver)
            self.peak_jvm = max(self.peak_jvm, others)
            self.peak_jvm_only = max(self.peak_jvm_only, jvm)
            self.peak_workers = max(self.peak_workers, others - jvm)
            self.peak_total = max(self.peak_total, driver + others)
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# -------------------------------------------------------------- checking


def found(results: dict, name: str, planted: dict) -> bool:
    entry = results["anomalies"].get(name)
    if not entry or entry["count"] == 0:
        return False
    if name == "G1c":
        return any(set(planted["ops"]) <= set(e.get("ops") or []) for e in entry["examples"])
    return any(
        e.get("key") == planted["key"]
        and (e.get("value") == planted["value"] or planted["value"] in (e.get("values") or []))
        for e in entry["examples"]
    )


def spark_floor(spark, history: Path, events: int, parse_alone: bool = True) -> dict:
    """Times what Spark alone costs on this machine for this history: a full
    parse (unless not `parse_alone`), and a parse plus the one shuffle any
    per-process or per-key check needs. No check can be faster than these;
    they put the events/s above in scale. Returns label -> events/s."""
    from pyspark.sql import functions as F

    from checkers.load import EVENT_SCHEMA

    def parsed():
        return spark.read.text(str(history)).select(F.from_json("value", EVENT_SCHEMA).alias("e")).select("e.*")

    steps = [("parse", lambda: parsed())] if parse_alone else []
    steps.append((SHUFFLED, lambda: parsed().repartition("process").sortWithinPartitions("process", "index")))
    rates = {}
    for label, frame in steps:
        started = time.monotonic()
        frame().write.format("noop").mode("overwrite").save()
        seconds = time.monotonic() - started
        rates[label] = events / seconds
        print(f"  Spark floor, {label:20}: {seconds:6.1f}s  events/s: {rates[label]:,.0f}", flush=True)
    return rates


# Histories up to this size are checked again, AGAIN_ROUNDS times, in the same
# (now warm) session, each time after timing the floor; the summary takes the
# medians of both. The first check of a new session is not warm, and a floor
# timed only once, right after it, is not either: at 100k events one such
# floor took 3.1 s where, alternating with warm checks, it took 0.63 to 0.80
# s, so the warm check's share of it looked twice what it was.
AGAIN_MAX_EVENTS = 2_000_000
AGAIN_ROUNDS = 3
SHUFFLED = "parse + one shuffle"


def bench(events: int, keep: bool, spark, floor: bool = True, again: bool = True) -> dict:
    from checkers.check import check_dir

    directory = Path(tempfile.mkdtemp(prefix=f"bench-checkers-{events}-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        started = time.monotonic()
        generated = generate(directory, events)
        size_mb = (directory / "history.jsonl").stat().st_size / 1e6
        print(
            f"generated {generated['events']:,} events ({size_mb:.0f} MB) in "
            f"{time.monotonic() - started:.1f}s at {directory}",
            flush=True,
        )
        with PeakMemory() as memory:
            started = time.monotonic()
            results = check_dir(directory, spark, max_examples=50, progress=lambda m: print("  " + m, flush=True))
            seconds = time.monotonic() - started
        rate = generated["events"] / seconds
        print(f"events: {generated['events']:,}  check: {seconds:.1f}s  events/s: {rate:,.0f}")
        print(
            f"peak memory: {memory.peak_total / 1024:.0f} MiB total "
            f"(driver {memory.peak_driver / 1024:.0f} MiB, Spark JVM + workers {memory.peak_jvm / 1024:.0f} MiB; "
            f"each at its own peak: JVM {memory.peak_jvm_only / 1024:.0f} MiB, "
            f"Python workers {memory.peak_workers / 1024:.0f} MiB)"
        )
        all_found = True
        for name, planted in sorted(generated["planted"].items()):
            ok = found(results, name, planted)
            all_found &= ok
            print(f"  planted {name:18} {planted}: {'found' if ok else 'MISSED'}")
        others = {n: e["count"] for n, e in results["anomalies"].items()}
        print(f"  all anomalies reported (name: count): {others}")
        print(f"  verdict: {results['verdict']}; every planted anomaly found: {all_found}", flush=True)
        rounds = AGAIN_ROUNDS if again and generated["events"] <= AGAIN_MAX_EVENTS else 0
        floors, agains = [], []
        for n in range(max(rounds, 1)):
            if floor:
                # the parse alone is printed once; the summary uses SHUFFLED only
                floors.append(
                    spark_floor(spark, directory / "history.jsonl", generated["events"], parse_alone=n == 0)[SHUFFLED]
                )
            if n < rounds:
                started = time.monotonic()
                check_dir(directory, spark, max_examples=50, progress=lambda _m: None)
                agains.append(time.monotonic() - started)
                print(
                    f"  checked again, warm ({n + 1} of {rounds}): {agains[-1]:.1f}s  events/s: "
                    f"{generated['events'] / agains[-1]:,.0f}",
                    flush=True,
                )
        return {
            "events": generated["events"],
            "seconds": seconds,
            "rate": rate,
            "found": all_found,
            "peak_mib": memory.peak_total / 1024,
            "floor": statistics.median(floors) if floors else None,
            "again": statistics.median(agains) if agains else None,
        }
    finally:
        if keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def summary(rows: list[dict]) -> None:
    print("\nsummary (2 shared cores: figures are noisy)")
    print(
        f"{'events':>12} {'check s':>8} {'events/s':>10} {'floor events/s':>15} {'of floor':>9} "
        f"{'peak MiB':>9} {'again s':>8} {'again of floor':>15} planted"
    )
    for r in rows:
        share = f"{r['rate'] / r['floor']:.0%}" if r["floor"] else "-"
        floor = f"{r['floor']:,.0f}" if r["floor"] else "-"
        again = f"{r['again']:.1f}" if r.get("again") else "-"
        again_share = f"{r['events'] / r['again'] / r['floor']:.0%}" if r.get("again") and r["floor"] else "-"
        print(
            f"{r['events']:>12,} {r['seconds']:>8.1f} {r['rate']:>10,.0f} {floor:>15} {share:>9} "
            f"{r['peak_mib']:>9.0f} {again:>8} {again_share:>15} {'all found' if r['found'] else 'MISSED'}",
            flush=True,
        )


# -------------------------------------------------------------- small runs


def heap_used_mib(spark) -> float:
    """The driver JVM's heap in use after a full collection."""
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    spark._jvm.java.lang.System.gc()
    time.sleep(0.2)
    spark._jvm.java.lang.System.gc()
    return (runtime.totalMemory() - runtime.freeMemory()) / 2**20


def small(events: int, runs: int, driver_memory: str) -> bool:
    """Cold `gregor check`, warm checks, and many checks in one session."""
    from checkers.check import check_dir
    from checkers.spark import get_spark

    root = Path(tempfile.mkdtemp(prefix="bench-checkers-small-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        first = root / "run-0"
        made = generate(first, events)["events"]
        gregor = Path(sys.executable).parent / "gregor"
        started = time.monotonic()
        done = subprocess.run([str(gregor), "check", str(first)], capture_output=True, text=True)
        cold = time.monotonic() - started
        print(
            f"gregor check, {made:,} events, new process: {cold:.1f}s wall (exit {done.returncode}; "
            f"Spark start included)",
            flush=True,
        )
        started = time.monotonic()
        spark = get_spark(None, {"spark.driver.memory": driver_memory})
        spark.range(1).count()
        print(f"Spark start alone (session + first job) in this process: {time.monotonic() - started:.1f}s", flush=True)
        warm = []
        for _ in range(6):
            started = time.monotonic()
            check_dir(first, spark, progress=lambda _m: None)
            warm.append(time.monotonic() - started)
        print(
            f"warm session, same history: first {warm[0]:.2f}s, then median {statistics.median(warm[1:]):.2f}s "
            f"(min {min(warm[1:]):.2f}s, max {max(warm[1:]):.2f}s)",
            flush=True,
        )
        before = heap_used_mib(spark)
        print(f"{runs} small checks in one session, {made:,} events each (each its own history):")
        print(f"  driver heap in use before: {before:.0f} MiB", flush=True)
        times = []
        for i in range(1, runs + 1):
            directory = root / f"run-{i}"
            generate(directory, events, seed=i)
            started = time.monotonic()
            check_dir(directory, spark, progress=lambda _m: None)
            times.append(time.monotonic() - started)
            shutil.rmtree(directory, ignore_errors=True)
            if i % 50 == 0:
                print(
                    f"  after {i:3} checks: heap in use {heap_used_mib(spark):.0f} MiB, "
                    f"median check {statistics.median(times[-50:]):.2f}s",
                    flush=True,
                )
        after = heap_used_mib(spark)
        print(
            f"  driver heap in use after:  {after:.0f} MiB ({after - before:+.0f} MiB); "
            f"max heap {spark._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20:.0f} MiB",
            flush=True,
        )
        return True
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> int:
    from checkers.spark import DEFAULT_CONF

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events",
        type=int,
        action="append",
        help="history size (repeatable); default 100,000, 1,000,000 and 10,000,000",
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated run directories")
    parser.add_argument(
        "--driver-memory",
        default=DEFAULT_CONF["spark.driver.memory"],
        help=f"spark.driver.memory (default {DEFAULT_CONF['spark.driver.memory']}, as gregor check)",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip timing Spark alone on each history")
    parser.add_argument(
        "--no-again",
        action="store_true",
        help=f"skip the {AGAIN_ROUNDS} warm checks of histories up to {AGAIN_MAX_EVENTS:,} events",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="small runs instead: cold gregor check, warm checks, many checks in one session",
    )
    parser.add_argument("--small-events", type=int, default=5000, help="events per small history (default 5000)")
    parser.add_argument("--small-runs", type=int, default=200, help="checks in one session (default 200)")
    args = parser.parse_args(argv)
    if args.small:
        return 0 if small(args.small_events, args.small_runs, args.driver_memory) else 1
    from checkers.spark import get_spark

    spark = get_spark(None, {"spark.driver.memory": args.driver_memory})
    rows = []
    for events in args.events or [100_000, 1_000_000, 10_000_000]:
        rows.append(bench(events, args.keep, spark, not args.no_floor, not args.no_again))
        summary(rows)
    return 0 if all(r["found"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
