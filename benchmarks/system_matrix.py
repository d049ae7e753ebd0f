"""Checked runs of every system and version Gregor supports, as one table.

For each row it runs `gregor run` (a lab per system and version, taken down
afterwards), then prints the verdict, the faults the nemesis started and
every anomaly with its count, marking the ones the definitions permit. A
system that comes out invalid is a finding, printed as measured. Rows:

- Apache Kafka 3.8.1, 3.9.1, 4.0.2 and 4.4.0: queue and txn;
- kfake (latest): txn and zombie;
- Tansu 0.6.0 over PostgreSQL: queue and group, and the refusal of txn;
- external: a Kafka lab brought up under another name, driven by its
  bootstrap address only (client faults).

    sudo .venv/bin/python benchmarks/system_matrix.py [--seconds 60] [--only kafka,kfake,tansu,external]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ground.faults import INJECTED_STARTS  # noqa: E402

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
NODE_FAULTS = "partition,pause,kill"
CLIENT_FAULTS = "partition,pause"

MATRIX = [  # (system, version, lab, workloads, nemesis, extra lab arguments)
    ("kafka", "3.8.1", "mk381", ("queue", "txn"), NODE_FAULTS, ()),
    ("kafka", "3.9.1", "mk391", ("queue", "txn"), NODE_FAULTS, ()),
    ("kafka", "4.0.2", "mk402", ("queue", "txn"), NODE_FAULTS, ()),
    ("kafka", "4.4.0", "mk440", ("queue", "txn"), NODE_FAULTS, ()),
    ("kfake", None, "mkf", ("txn", "zombie"), NODE_FAULTS, ()),
    ("tansu", "0.6.0", "mtansu", ("queue", "group"), NODE_FAULTS, ("--storage", "postgres")),
]


def gregor(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([GREGOR, *argv], capture_output=True, text=True, timeout=timeout)


def history_counts(run_dir: Path) -> tuple[int, int]:
    """(events, nemesis faults started) of a run's history, in one read."""
    events = faults = 0
    with open(run_dir / "history.jsonl", "rb") as handle:
        for raw in handle:
            events += 1
            event = json.loads(raw)
            if event.get("process") == "nemesis" and event.get("f") in INJECTED_STARTS:
                faults += 1
    return events, faults


def row(
    system: str,
    version: str | None,
    workload: str,
    nemesis: str,
    store: Path,
    result: subprocess.CompletedProcess,
    seconds: float,
) -> dict:
    runs = sorted(p for p in store.glob("*/2*") if (p / "test.json").exists())
    if not runs:
        return {
            "system": system,
            "version": version or "latest",
            "workload": workload,
            "nemesis": nemesis,
            "verdict": f"no run (exit {result.returncode}): {(result.stderr or result.stdout).strip()[-300:]}",
        }
    run_dir = runs[-1]
    test = json.loads((run_dir / "test.json").read_text())
    results = json.loads((run_dir / "results.json").read_text()) if (run_dir / "results.json").exists() else {}
    anomalies = {name: a for name, a in (results.get("anomalies") or {}).items() if int(a.get("count") or 0)}
    setup = test.get("setup") or {}
    events, faults = history_counts(run_dir)
    return {
        "system": system,
        "version": test.get("version") or version,
        "workload": workload,
        "nemesis": nemesis,
        "verdict": results.get("verdict", f"unchecked (exit {result.returncode})"),
        "faults": faults,
        "events": events,
        "txn_version": setup.get("transaction.version", "-"),
        "drain": "complete" if (test.get("drain") or {}).get("complete") else "incomplete",
        "anomalies": ", ".join(
            f"{n} {a['count']}{'' if not a.get('allowed') else ' (permitted)'}" for n, a in sorted(anomalies.items())
        )
        or "none",
        "wall_s": round(seconds),
        "run_dir": str(run_dir),
    }


def run_one(
    system: str, version: str | None, lab: str, workload: str, nemesis: str, extra: tuple, seconds: float, store: Path
) -> dict:
    argv = [
        "run",
        "--system",
        system,
        "--lab",
        lab,
        "--workload",
        workload,
        "--time-limit",
        str(seconds),
        "--nemesis",
        nemesis,
        "--store",
        str(store / f"{lab}-{workload}"),
        "--seed",
        "0",
        *extra,
    ]
    if version:
        argv += ["--version", version]
    print(f"$ gregor {' '.join(argv)}", flush=True)
    started = time.monotonic()
    result = gregor(*argv, timeout=seconds * 4 + 900)
    found = row(system, version, workload, nemesis, store / f"{lab}-{workload}", result, time.monotonic() - started)
    print(f"  -> {found['verdict']}: {found.get('anomalies', '')}", flush=True)
    return found


def refusal(system: str, version: str, lab: str, workload: str, extra: tuple, store: Path) -> dict:
    result = gregor(
        "run",
        "--system",
        system,
        "--version",
        version,
        "--lab",
        lab,
        "--workload",
        workload,
        "--time-limit",
        "10",
        "--store",
        str(store / "refused"),
        *extra,
    )
    said = (result.stderr.strip().splitlines() or ["(nothing)"])[-1]
    print(f"  {system} {workload}: exit {result.returncode}: {said}", flush=True)
    return {
        "system": system,
        "version": version,
        "workload": workload,
        "nemesis": "-",
        "verdict": f"refused (exit {result.returncode})",
        "anomalies": said,
    }


def external(seconds: float, store: Path) -> list[dict]:
    """A lab brought up under another name, then driven as a cluster Gregor did not start."""
    up = gregor("lab", "up", "--lab", "msrc", "--version", "3.9.1")
    if up.returncode != 0:
        return [
            {
                "system": "external",
                "version": "-",
                "workload": "queue",
                "nemesis": CLIENT_FAULTS,
                "verdict": f"source lab failed: {up.stderr.strip()[-300:]}",
            }
        ]
    try:
        from harness.lab import Lab

        bootstrap = Lab.attach("msrc").bootstrap_servers
        return [run_one("external", None, "mext", "queue", CLIENT_FAULTS, ("--bootstrap", bootstrap), seconds, store)]
    finally:
        gregor("lab", "down", "--lab", "mext")
        gregor("lab", "down", "--lab", "msrc")


def markdown(rows: list[dict]) -> str:
    head = "| system | version | workload | nemesis | faults | events | txn protocol | drain | verdict | anomalies |"
    lines = [head, "|" + " --- |" * 10]
    for r in rows:
        lines.append(
            f"| {r['system']} | {r['version']} | {r['workload']} | {r['nemesis']} | {r.get('faults', '-')} "
            f"| {r.get('events', '-')} | {r.get('txn_version', '-')} | {r.get('drain', '-')} "
            f"| {r['verdict']} | {r.get('anomalies', '')} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="main phase of each run (default 60)")
    parser.add_argument("--only", default="kafka,kfake,tansu,external", help="systems to run")
    parser.add_argument("--store", default="store/matrix")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    store = Path(args.store).resolve() / time.strftime("%Y%m%dT%H%M%S")
    rows: list[dict] = []
    for system, version, lab, workloads, nemesis, extra in MATRIX:
        if system not in only:
            continue
        try:
            for workload in workloads:
                rows.append(run_one(system, version, lab, workload, nemesis, extra, args.seconds, store))
            if system == "tansu":
                rows.append(refusal(system, version, lab, "txn", extra, store))
        finally:
            gregor("lab", "down", "--lab", lab)
    if "external" in only:
        rows.extend(external(args.seconds, store))
    (store / "matrix.json").parent.mkdir(parents=True, exist_ok=True)
    (store / "matrix.json").write_text(json.dumps(rows, indent=1))
    print(markdown(rows))
    print(f"\nruns and matrix.json: {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
