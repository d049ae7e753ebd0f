"""What the wire relay costs when it is in place and no rule is on (issue 41: keep >= 90%).

Runs `gregor run --workload queue` with no pacing (a rate no client reaches), side by side:
`without` (each client in its namespace, no relay) and `relay` (the same, with `--nemesis wire`
whose interval is so long that no rule is ever switched on: every request crosses the relay,
which reads each header and forwards it). Rounds alternate the two; prints each run's acked
sends/s and the median ratio. Run it under the machine's lock, on a lab of its own:

    flock /tmp/gregor-heavy.lock .venv/bin/python benchmarks/bench_wire_overhead.py --lab wbench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from ground.faults import WIRE

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
MODES = {
    "without": [],
    # a rule that is never switched on: the first fault would come after 500 s at least
    "relay": ["--nemesis", WIRE, "--wire-rule", "delay:api=EndTxn:ms=1", "--nemesis-interval", "1000"],
}


def one_run(lab: str, mode: str, seconds: float, concurrency: int, store: str) -> float:
    command = [GREGOR, "run", "--lab", lab, "--store", store, "--workload", "queue", "--client-netns"]
    command += ["--rate", "1000000", "--time-limit", str(seconds), "--concurrency", str(concurrency)]
    command += ["--no-check", "--name", f"wire-bench-{mode}", *MODES[mode]]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    latest = os.path.realpath(os.path.join(store, "latest"))
    with open(os.path.join(latest, "test.json")) as handle:
        test = json.load(handle)
    phase = test["main_phase"]
    if mode == "relay":
        final = test["wire_relay"]["final"]
        assert final["refused"] == final["desync"] == 0, final
    return phase["acked_sends"] / phase["seconds"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="wbench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--keep-lab", action="store_true")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="wire-bench-") as store:
        try:
            for round_number in range(args.rounds):
                order = list(MODES) if round_number % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    rate = one_run(args.lab, mode, args.seconds, args.concurrency, store)
                    rates[mode].append(rate)
                    print(f"round {round_number + 1} {mode:8s} {rate:9.0f} acked sends/s", flush=True)
        finally:
            if not args.keep_lab:
                subprocess.run([GREGOR, "lab", "down", "--lab", args.lab], check=False, stdout=subprocess.DEVNULL)
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    ratio = medians["relay"] / medians["without"]
    print(f"median acked sends/s: without {medians['without']:.0f}, relay {medians['relay']:.0f}: {ratio:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
