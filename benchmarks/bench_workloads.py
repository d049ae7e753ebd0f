"""Sustained throughput of `gregor run` with full recording, on the 3-node lab.

Runs the queue and txn workloads for --seconds each (default 30) and prints,
from the recorded history itself: completed client ops/s and acknowledged
sends/s over the steady part of the main phase (after the first 20 %, when
clients have connected), and the controller's CPU share (its user+system CPU
time over the main phase's wall time; clients are separate processes).
Goal: at least 5,000 acknowledged sends/s for queue.

    .venv/bin/python benchmarks/bench_workloads.py [--seconds 30] [--lab wl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")

RUNS = {
    "queue": ["--concurrency", "8", "--rate", "200", "--batch", "100"],
    "txn": ["--concurrency", "6", "--rate", "1000"],
}


def steady_rates(history_path: str, concurrency: int, drain_process_min: int) -> dict:
    """Completed ops/s and acked sends/s of client processes after the warm-up."""
    completions = []
    with open(history_path, "rb") as handle:
        for raw in handle:
            event = json.loads(raw)
            process = event.get("process")
            if event.get("type") == "invoke" or not isinstance(process, int):
                continue
            if process >= drain_process_min:
                continue  # the final drain is not the workload
            sends = 0
            if event["type"] == "ok":
                sends = sum(1 for m in event.get("mops") or () if m.get("f") == "send")
            completions.append((event["time"], sends))
    if len(completions) < 2:
        return {"ops_per_s": 0.0, "acked_sends_per_s": 0.0, "window_s": 0.0}
    first, last = completions[0][0], completions[-1][0]
    start = first + (last - first) * 0.2
    window = [c for c in completions if c[0] >= start]
    seconds = (last - start) / 1e9
    return {
        "ops_per_s": len(window) / seconds,
        "window_s": seconds,
        "acked_sends_per_s": sum(s for _, s in window) / seconds,
    }


def run(workload: str, seconds: float, lab: str, store: str) -> dict:
    argv = [
        GREGOR,
        "run",
        "--workload",
        workload,
        "--lab",
        lab,
        "--store",
        store,
        "--time-limit",
        str(seconds),
        "--no-check",
        *RUNS[workload],
    ]
    print(f"$ {' '.join(argv)}", flush=True)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    run_dir = os.path.realpath(os.path.join(store, "latest"))
    with open(os.path.join(run_dir, "test.json")) as handle:
        test = json.load(handle)
    history = os.path.join(run_dir, "history.jsonl")
    drain_min = test["drain"].get("process", 10**12)
    rates = steady_rates(history, test["concurrency"], drain_min)
    main = test["main_phase"]
    return {
        "workload": workload,
        **rates,
        "controller_cpu_share": main["controller_cpu_share"],
        "ok": main["ok"],
        "fail": main["fail"],
        "info": main["info"],
        "events": test.get("events"),
        "drain_complete": test["drain"]["complete"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--lab", default=os.environ.get("GREGOR_LAB", "wl"))
    parser.add_argument("--workloads", default="queue,txn")
    parser.add_argument("--keep-lab", action="store_true", help="leave the benchmark's lab running afterwards")
    args = parser.parse_args()
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="gregor-bench-") as store:
            for workload in args.workloads.split(","):
                results.append(run(workload, args.seconds, args.lab, store))
    finally:
        if not args.keep_lab:  # three idle brokers would skew whatever is measured next
            subprocess.run([GREGOR, "lab", "down", "--lab", args.lab], check=False)
    print()
    print(
        f"{'workload':8} {'ops/s':>9} {'acked sends/s':>14} {'controller cpu':>15} "
        f"{'ok':>8} {'fail':>6} {'info':>5} {'drain':>9}"
    )
    for r in results:
        print(
            f"{r['workload']:8} {r['ops_per_s']:9.0f} {r['acked_sends_per_s']:14.0f} "
            f"{r['controller_cpu_share'] * 100:14.1f}% {r['ok']:8} {r['fail']:6} "
            f"{r['info']:5} {'complete' if r['drain_complete'] else 'INCOMPLETE':>9}"
        )
    queue = [r for r in results if r["workload"] == "queue"]
    if queue:
        verdict = "met" if queue[0]["acked_sends_per_s"] >= 5000 else "NOT met"
        print(f"goal >= 5,000 acknowledged sends/s for queue: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
