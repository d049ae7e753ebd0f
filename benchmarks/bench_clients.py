"""librdkafka against Kafka's Java client: the queue workload on one lab, side by side.

Runs `gregor run --workload queue` unpaced (a --rate no client reaches) on each
client in turn, --rounds times, on one lab (Kafka 4.4.0, transaction.version=2,
brought up here and taken down after), and prints acknowledged sends/s over the
steady part of each main phase (benchmarks/bench_workloads.py's measure) and,
for the Java client, each client JVM's resident memory (VmRSS, sampled every
second from /proc while the run lasts). Goal: the Java client at least 80 % of
librdkafka's rate, so that it is never what limits a run.

    sudo .venv/bin/python benchmarks/bench_clients.py [--seconds 30] [--rounds 2] [--batch 1,10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_workloads import steady_rates  # noqa: E402
from ground.procfs import proc_cmdline  # noqa: E402

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
LAB = "gbench"
LAB_ARGS = ["--version", "4.4.0", "--transaction-version", "2"]
CLIENTS = ("librdkafka", "java")


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class JvmWatch(threading.Thread):
    """Every second, the RSS of each running driver JVM (by its command line), until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.halt = threading.Event()
        self.samples: dict[int, list[int]] = {}

    def run(self) -> None:
        while not self.halt.wait(1.0):
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and "GregorKafkaDriver" in proc_cmdline(int(entry.name)):
                    found = rss_kib(int(entry.name))
                    if found:
                        self.samples.setdefault(int(entry.name), []).append(found)

    def per_jvm_mib(self) -> list[float]:
        """Each JVM's highest RSS, in MiB."""
        return sorted(max(s) / 1024 for s in self.samples.values())


def run(client: str, batch: int, seconds: float, store: str, concurrency: int, workload: str = "queue") -> dict:
    argv = [GREGOR, "run", "--workload", workload, "--lab", LAB, *LAB_ARGS, "--client", client]
    argv += ["--concurrency", str(concurrency), "--rate", "1000000", "--batch", str(batch)]
    argv += ["--time-limit", str(seconds), "--store", store, "--no-check"]
    print(f"$ gregor {' '.join(argv[1:])}", flush=True)
    watch = JvmWatch()
    watch.start()
    try:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    finally:
        watch.halt.set()
        watch.join()
    run_dir = os.path.realpath(os.path.join(store, "latest"))
    test = json.loads(Path(run_dir, "test.json").read_text())
    rates = steady_rates(os.path.join(run_dir, "history.jsonl"), test["concurrency"], test["drain"]["process"])
    jvms = watch.per_jvm_mib()
    return {
        "client": client,
        "workload": workload,
        "batch": batch,
        "acked_sends_per_s": rates["acked_sends_per_s"],
        "ops_per_s": rates["ops_per_s"],
        "jvm_rss_mib": jvms,
        "run_dir": run_dir,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", default="1,10", help="sends per producer op, one comparison each (default 1,10)")
    parser.add_argument("--concurrency", type=int, default=6, help="client processes (half producers)")
    parser.add_argument("--store", default=None, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--txn", action="store_true", help="also compare the unpaced txn workload (ops/s)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gregor-bench-clients-") as scratch:
        store = args.store or scratch
        try:
            for batch in [int(b) for b in args.batch.split(",")]:
                for _ in range(args.rounds):
                    for client in CLIENTS:
                        results.append(run(client, batch, args.seconds, store, args.concurrency))
            for _ in range(args.rounds if args.txn else 0):
                for client in CLIENTS:
                    results.append(run(client, 1, args.seconds, store, 4, "txn"))
        finally:
            subprocess.run([GREGOR, "lab", "down", "--lab", LAB], check=False, capture_output=True)
    print()
    print(
        f"{'batch':>5} {'client':10} {'acked sends/s (each round)':>30} {'median':>8} {'JVM RSS MiB (per client)':>28}"
    )
    for batch in sorted({r["batch"] for r in results if r["workload"] == "queue"}):
        medians = {}
        for client in CLIENTS:
            mine = [r for r in results if r["workload"] == "queue" and r["batch"] == batch and r["client"] == client]
            rates = [r["acked_sends_per_s"] for r in mine]
            medians[client] = statistics.median(rates)
            rss = sorted(m for r in mine for m in r["jvm_rss_mib"])
            rss_text = f"{min(rss):.0f}-{max(rss):.0f} (median {statistics.median(rss):.0f})" if rss else "-"
            print(
                f"{batch:5} {client:10} {', '.join(f'{x:,.0f}' for x in rates):>30} {medians[client]:8,.0f} "
                f"{rss_text:>28}"
            )
        share = medians["java"] / medians["librdkafka"] if medians["librdkafka"] else 0.0
        print(f"{batch:5} java / librdkafka: {share:.0%} (goal >= 80 %: {'met' if share >= 0.8 else 'NOT met'})")
    txns = {c: [r["ops_per_s"] for r in results if r["workload"] == "txn" and r["client"] == c] for c in CLIENTS}
    if txns["java"]:
        print(
            "txn ops/s (unpaced, 4 transactional clients): "
            + "; ".join(f"{c} {', '.join(f'{x:,.0f}' for x in txns[c])}" for c in CLIENTS)
        )
    for r in results:
        print(f"  {r['workload']} {r['client']} batch {r['batch']}: {r['run_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
