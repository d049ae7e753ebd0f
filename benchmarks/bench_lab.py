"""How long `lab up` takes, and what the brokers cost in memory.

Prints, per run, the seconds from the call to "every partition of a test
topic has a leader and a full ISR in every broker's view" (goal: under 30 s
for 3 nodes on a 2-core machine), and the brokers' resident memory.

    sudo .venv/bin/python benchmarks/bench_lab.py [--nodes 3] [--version V] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import kafka_install  # noqa: E402
from harness.lab import Lab  # noqa: E402


def rss_mib(pid: int | None) -> float:
    if pid is None:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--version", default=kafka_install.DEFAULT_VERSION)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--lab", default="labb", help="lab name used for the benchmark (default labb)")
    args = parser.parse_args()
    kafka_install.install(args.version, progress=lambda _m: None)
    times = []
    for run in range(1, args.repeat + 1):
        Lab.down(args.lab, progress=lambda _m: None)
        lab = Lab.up(nodes=args.nodes, version=args.version, name=args.lab, progress=lambda _m: None)
        try:
            time.sleep(1)
            memory = [rss_mib(node.pid()) for node in lab.nodes]
            times.append(lab.up_seconds)
            print(f"run {run}: lab up ({args.nodes} nodes, Kafka {args.version}) took {lab.up_seconds:.1f} s; "
                  f"broker RSS {sum(memory):.0f} MiB total, {max(memory):.0f} MiB max", flush=True)
        finally:
            Lab.down(args.lab, progress=lambda _m: None)
    print(f"lab up: median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} runs "
          f"(goal: under 30 s for 3 nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
