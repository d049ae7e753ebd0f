"""How long a report takes for a 1-million-event run, to write and to open.

Goals: report.html written in < 20 s, opened by headless Chromium in < 3 s
(navigationStart to the load event). Builds a synthetic run directory
(history.jsonl of N events, results.json with realistic stats, fault
windows, partition pictures and a few anomalies whose ops are spread over
the whole history, so the streaming pass must read to the end).

    .venv/bin/python benchmarks/bench_report.py [--events 1000000] [--dir /tmp/gregor-bench-report]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ground.faults import KILL, NETEM, PARTITION, PAUSE  # noqa: E402
from reports.browser import headless_chromium  # noqa: E402
from reports.junit import write_junit  # noqa: E402
from reports.render import write_report  # noqa: E402

KEYS = 12
PROCESSES = 16
DURATION_S = 600.0


def write_history(path: Path, events: int, rng: random.Random) -> list[int]:
    """Invoke/ok pairs of sends and polls; returns the completion indices (op ids)."""
    ops, values, offsets = [], [0] * KEYS, [0] * KEYS
    step = int(DURATION_S * 1e9 / events)
    with path.open("w") as out:
        index = 0
        while index < events - 1:
            process = rng.randrange(PROCESSES)
            key = rng.randrange(KEYS)
            start = index * step
            if process % 2 == 0:
                value = values[key]
                values[key] += 1
                out.write(
                    f'{{"index": {index}, "time": {start}, "process": {process}, "type": "invoke", "f": "send", '
                    f'"mops": [{{"f": "send", "key": {key}, "value": {value}}}]}}\n'
                )
                kind = "ok" if rng.random() > 0.02 else "fail"
                offset = offsets[key] if kind == "ok" else None
                offsets[key] += kind == "ok"
                out.write(
                    f'{{"index": {index + 1}, "time": {start + step}, "process": {process}, "type": "{kind}", '
                    f'"f": "send", "mops": [{{"f": "send", "key": {key}, "value": {value}, "offset": '
                    f"{json.dumps(offset)}}}]}}\n"
                )
            else:
                high = offsets[key]
                mops = ", ".join(
                    f'{{"f": "poll", "key": {key}, "offset": {o}, "value": {o}}}' for o in range(max(0, high - 3), high)
                )
                out.write(
                    f'{{"index": {index}, "time": {start}, "process": {process}, "type": "invoke", "f": "poll", '
                    f'"mops": [{{"f": "poll"}}]}}\n'
                )
                out.write(
                    f'{{"index": {index + 1}, "time": {start + step}, "process": {process}, "type": "ok", '
                    f'"f": "poll", "mops": [{mops}]}}\n'
                )
            ops.append(index + 1)
            index += 2
    return ops


def results_for(ops: list[int], events: int, rng: random.Random) -> dict:
    bucket = 1.0
    rows = []
    for second in range(int(DURATION_S)):
        for f in ("send", "poll"):
            for kind, share in (("ok", 0.97), ("fail", 0.02), ("info", 0.01)):
                rows.append(
                    {
                        "t": float(second),
                        "f": f,
                        "type": kind,
                        "count": int(events / 2 / DURATION_S / 2 * share * rng.uniform(0.7, 1.1)),
                        "p50_ms": rng.uniform(2, 8),
                        "p99_ms": rng.uniform(10, 80),
                        "max_ms": rng.uniform(80, 400),
                    }
                )
    lag = [{"t": float(s), "key": k, "lag_ms": rng.uniform(5, 50)} for s in range(int(DURATION_S)) for k in range(KEYS)]
    kinds = [
        (kind(KILL).start, "kill n2"),
        (kind(PAUSE).start, "pause n1"),
        (kind(PARTITION).start, "partition n3 | n1 n2"),
        (kind(NETEM).start, "netem 100ms"),
    ]
    nemesis = []
    for number, start in enumerate(range(20, int(DURATION_S) - 30, 30)):
        f, label = kinds[number % 4]
        nemesis.append({"f": f, "label": label, "start_s": float(start), "stop_s": float(start + 12), "value": {}})
    picked = sorted(rng.sample(ops, 40))

    def examples(name, count):
        return [
            {
                "key": i % KEYS,
                "value": 1000 + i,
                "offset": 1000 + i,
                "ops": [picked[(i * 7 + n) % 40] for n in range(2)],
                "nemesis": ["kill n2"],
            }
            for i in range(count)
        ]

    anomalies = {
        "lost-write": {"count": 17, "allowed": False, "why_allowed": None, "examples": examples("lost-write", 10)},
        "aborted-read": {"count": 3, "allowed": False, "why_allowed": None, "examples": examples("aborted-read", 3)},
        "duplicate": {
            "count": 112,
            "allowed": True,
            "why_allowed": "enable.idempotence=false",
            "examples": examples("duplicate", 10),
        },
        "poll-skip": {"count": 40, "allowed": True, "why_allowed": "subscribe", "examples": examples("poll-skip", 10)},
    }
    statuses = ["read"] * 90 + ["acked-unread"] * 6 + ["lost", "duplicate", "unseen", "aborted"]
    partitions = {
        str(k): {
            "topic": "t0",
            "partition": k,
            "truncated": True,
            "offsets": [{"offset": o, "index": o, "values": [o], "status": rng.choice(statuses)} for o in range(3000)],
        }
        for k in range(4)
    }
    return {
        "verdict": "invalid",
        "anomalies": anomalies,
        "cut_short": False,
        "config": {
            "acks": "all",
            "enable.idempotence": False,
            "isolation.level": "read_committed",
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": False,
            "auto.commit": False,
            "subscribe": True,
            "transactional": False,
        },
        "stats": {
            "ops": len(ops),
            "ok": len(ops),
            "fail": 0,
            "info": 0,
            "events": events,
            "duration_s": DURATION_S,
            "latency": [
                {
                    "f": "send",
                    "type": "ok",
                    "count": len(ops) // 2,
                    "p50_ms": 4.0,
                    "p90_ms": 9.0,
                    "p99_ms": 30.0,
                    "max_ms": 300.0,
                }
            ],
            "timeseries": {"bucket_s": bucket, "rows": rows},
            "lag": {"bucket_s": bucket, "rows": lag},
        },
        "nemesis": nemesis,
        "partitions": partitions,
        "elle": {"available": False, "reason": "benchmark"},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", default="/tmp/gregor-bench-report")
    args = parser.parse_args()
    run = Path(args.dir) / "store" / "bench" / "20261122T000000"
    shutil.rmtree(Path(args.dir) / "store", ignore_errors=True)
    run.mkdir(parents=True)
    rng = random.Random(1)
    print(f"building a run of {args.events:,} events in {run} ...", flush=True)
    ops = write_history(run / "history.jsonl", args.events, rng)
    test = {
        "name": "bench",
        "system": "kafka",
        "version": "3.9.1",
        "workload": "send",
        "seed": 1,
        "concurrency": PROCESSES,
        "keys": {str(k): ["t0", k] for k in range(KEYS)},
        "nodes": ["n1", "n2", "n3"],
        "drain": {"complete": True},
        "nemesis": {"faults": [KILL, PAUSE, PARTITION, NETEM]},
    }
    (run / "test.json").write_text(json.dumps(test))
    (run / "results.json").write_text(json.dumps(results_for(ops, args.events, rng)))
    size_mb = (run / "history.jsonl").stat().st_size / 1e6
    print(f"history.jsonl: {size_mb:.0f} MB; writing the report ...", flush=True)

    started = time.monotonic()
    page = write_report(run)
    write_s = time.monotonic() - started
    started = time.monotonic()
    write_junit(run)
    junit_s = time.monotonic() - started

    with headless_chromium() as driver:
        driver.get("about:blank")
        driver.get(page.as_uri())
        open_ms = driver.execute_script("const t = performance.timing; return t.loadEventEnd - t.navigationStart")
        svgs = driver.execute_script("return document.querySelectorAll('svg').length")
    print(f"events: {args.events:,}  page: {page.stat().st_size / 1e6:.1f} MB  svg pictures: {svgs}")
    print(f"write report.html: {write_s:.2f} s (goal < 20 s)  {'OK' if write_s < 20 else 'SLOW'}")
    print(f"write junit.xml: {junit_s:.2f} s")
    print(
        f"peak memory of this process (history streamed, never loaded): "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    print(
        f"open in headless chromium (navigationStart -> loadEventEnd): {open_ms / 1000:.2f} s (goal < 3 s)  "
        f"{'OK' if open_ms < 3000 else 'SLOW'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
