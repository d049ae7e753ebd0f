"""Transactions under faults across Kafka versions, both clients and both transaction protocols.

One cell is a Kafka version, the brokers' transaction.version (0 and 2 where the
version has the feature; the version's own default where it has not), a client
(librdkafka or Kafka's Java client, the newest) and a workload (txn or zombie),
run for --seconds (default 120) with partition, pause and kill aimed at the
transaction coordinator and the partition leaders, seed 1, checked. A red cell
(verdict invalid or unknown) gets --reruns more runs (seeds 2, 3, 4); a red cell
is a finding, reported as measured.

Resumable: each run is recorded in <store>/txn-matrix.json as it finishes, and
the table (docs/TXN-MATRIX.md by default) is rewritten after each; a run already
recorded is skipped. Each run is its own lab (up, run, down), so that a machine
shared under a lock can give the lock away between cells:

    sudo .venv/bin/python benchmarks/txn_matrix.py --list
    sudo .venv/bin/python benchmarks/txn_matrix.py [--lock /tmp/gregor-heavy.lock [--polite]] [--only 4.4.0]

With --lock, each run takes the lock for itself (flock), and nothing else does;
with --polite too, only when the lock is free, so that whoever waits for it goes first.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.system_matrix import history_counts  # noqa: E402

GREGOR = os.path.join(os.path.dirname(sys.executable), "gregor")
ROOT = Path(__file__).resolve().parent.parent
VERSIONS = {"3.9.1": (None,), "4.0.2": (0, 2), "4.3.0": (0, 2), "4.3.1": (0, 2), "4.4.0": (0, 2)}
CLIENTS = ("librdkafka", "java")
WORKLOADS = {"txn": ["--concurrency", "4", "--rate", "100"], "zombie": ["--concurrency", "4", "--rate", "60"]}
NEMESIS = ["--nemesis", "partition,pause,kill", "--nemesis-targets", "coordinator,leader", "--nemesis-interval", "10"]
LAB = "gmatrix"
RED = ("invalid", "unknown")
POLITE_S = 20.0


def cells() -> list[dict]:
    return [
        {"version": version, "tv": tv, "client": client, "workload": workload}
        for version, levels in VERSIONS.items()
        for tv in levels
        for client in CLIENTS
        for workload in WORKLOADS
    ]


def cell_id(cell: dict) -> str:
    tv = "default" if cell["tv"] is None else f"tv{cell['tv']}"
    return f"{cell['version']}-{tv}-{cell['client']}-{cell['workload']}"


class Locked:
    """The machine-wide lock for one run, when asked for. A polite lock takes it only
    when it is free, trying every POLITE_S: whoever waits on it blocking goes first,
    so the matrix fills the gaps of a machine that others work on."""

    def __init__(self, path: str | None, polite: bool = False):
        self.path, self.polite = path, polite

    def __enter__(self):
        if self.path:
            self.handle = open(self.path, "a")
            if not self.polite:
                fcntl.flock(self.handle, fcntl.LOCK_EX)
                return self
            while True:
                try:
                    fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return self
                except BlockingIOError:
                    time.sleep(POLITE_S)
        return self

    def __exit__(self, *exc):
        if self.path:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def run_cell(cell: dict, seed: int, seconds: float, store: Path) -> dict:
    """One run: lab up (by gregor run), run, check, lab down."""
    name = cell_id(cell)
    lab_args = ["--version", cell["version"]] + (
        [] if cell["tv"] is None else ["--transaction-version", str(cell["tv"])]
    )
    argv = [GREGOR, "run", "--lab", LAB, *lab_args, "--client", cell["client"], "--workload", cell["workload"]]
    argv += [*WORKLOADS[cell["workload"]], *NEMESIS, "--time-limit", str(seconds), "--seed", str(seed)]
    argv += ["--store", str(store / name), "--name", f"seed{seed}"]
    subprocess.run([GREGOR, "lab", "down", "--lab", LAB], capture_output=True)
    started = time.monotonic()
    log = store / name / f"seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "w") as out:
            code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=seconds * 4 + 900).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    finally:
        subprocess.run([GREGOR, "lab", "down", "--lab", LAB], capture_output=True)
    record = {**cell, "id": name, "seed": seed, "exit": code, "wall_s": round(time.monotonic() - started)}
    record["command"] = "gregor " + " ".join(argv[1:])
    runs = sorted(p for p in (store / name / f"seed{seed}").glob("2*") if (p / "test.json").exists())
    if not runs:
        record["verdict"] = f"no run (exit {code}; {log})"
        return record
    run_dir = runs[-1]
    test = json.loads((run_dir / "test.json").read_text())
    results = json.loads((run_dir / "results.json").read_text()) if (run_dir / "results.json").exists() else {}
    anomalies = {n: a for n, a in (results.get("anomalies") or {}).items() if int(a.get("count") or 0)}
    events, faults = history_counts(run_dir)
    seen = test.get("transaction_protocol") or {}
    record.update(
        run_dir=str(run_dir),
        verdict=results.get("verdict", f"unchecked (exit {code})"),
        anomalies={n: {"count": a["count"], "allowed": bool(a.get("allowed"))} for n, a in sorted(anomalies.items())},
        events=events,
        faults=faults,
        tv_finalized=(test.get("setup") or {}).get("transaction.version"),
        protocol=seen.get("protocol") or seen.get("error"),
        client_version=(test.get("client") or {}).get("library.version"),
        drain="complete" if (test.get("drain") or {}).get("complete") else "incomplete",
    )
    return record


def anomalies_text(record: dict) -> str:
    found = record.get("anomalies") or {}
    return ", ".join(f"{n} {a['count']}{' (permitted)' if a['allowed'] else ''}" for n, a in found.items()) or "none"


def table(records: list[dict], seconds: float) -> str:
    head = (
        "# Transactions under faults: Kafka versions x clients x transaction protocols\n\n"
        "Written by `benchmarks/txn_matrix.py` (the command and how to read it: its docstring). Each cell: "
        f"a {seconds:g} s run of the workload with partition, pause and kill aimed at the transaction "
        "coordinator and the partition leaders (`--nemesis partition,pause,kill --nemesis-targets "
        "coordinator,leader --nemesis-interval 10`), seed 1; a red cell (invalid or unknown) has 3 more "
        "runs, seeds 2 to 4, each its own row. `tv` is the brokers' finalized transaction.version (test.json "
        "setup); `protocol seen` what the brokers' transaction log recorded for the run's transactional ids "
        "(docs/CLIENTS.md). Run directories are in the store, not in the repository.\n\n"
    )
    lines = [
        "| kafka | tv | client | workload | seed | protocol seen | faults | verdict | anomalies | run |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {cell_id(c): i for i, c in enumerate(cells())}
    for r in sorted(records, key=lambda r: (order.get(r["id"], len(order)), r["seed"])):
        client = r["client"] + (f" {r['client_version']}" if r.get("client_version") else "")
        tv = r.get("tv_finalized", r["tv"])
        verdict = f"**{r['verdict']}**" if r.get("verdict") in RED else r.get("verdict")
        lines.append(
            f"| {r['version']} | {'-' if tv is None else tv} | {client} | {r['workload']} | {r['seed']} "
            f"| {r.get('protocol') or '-'} | {r.get('faults', '-')} | {verdict} | {anomalies_text(r)} "
            f"| {r.get('run_dir', '-')} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="main phase of each run (default 120)")
    parser.add_argument("--reruns", type=int, default=3, help="more runs of a red cell (default 3)")
    parser.add_argument(
        "--store", default="store/txn-matrix", help="runs and txn-matrix.json (default store/txn-matrix)"
    )
    parser.add_argument("--table", default=str(ROOT / "docs" / "TXN-MATRIX.md"), help="the Markdown table written")
    parser.add_argument("--only", default=None, help="cells whose id contains this text, e.g. 4.4.0-tv2")
    parser.add_argument("--lock", default=None, help="flock this file around each run (a shared machine)")
    parser.add_argument(
        "--polite", action="store_true", help="with --lock: take the lock only when it is free (others first)"
    )
    parser.add_argument("--list", action="store_true", help="print the cells and whether each ran, and exit")
    args = parser.parse_args(argv)
    store = Path(args.store).resolve()
    store.mkdir(parents=True, exist_ok=True)
    ledger = store / "txn-matrix.json"
    records: list[dict] = json.loads(ledger.read_text()) if ledger.exists() else []
    done = {(r["id"], r["seed"]) for r in records}
    chosen = [c for c in cells() if not args.only or args.only in cell_id(c)]
    if args.list:
        for cell in chosen:
            seeds = sorted(s for i, s in done if i == cell_id(cell))
            print(f"{cell_id(cell):<36} {'ran seeds ' + ','.join(map(str, seeds)) if seeds else 'to run'}")
        return 0
    for cell in chosen:
        seed = 1
        while seed <= 1 + args.reruns:
            if (cell_id(cell), seed) not in done:
                print(f"txn matrix: {cell_id(cell)} seed {seed}", flush=True)
                with Locked(args.lock, args.polite):
                    record = run_cell(cell, seed, args.seconds, store)
                print(f"  -> {record['verdict']}: {anomalies_text(record)} ({record.get('run_dir', '')})", flush=True)
                records.append(record)
                done.add((record["id"], seed))
                ledger.write_text(json.dumps(records, indent=1))
                Path(args.table).write_text(table(records, args.seconds))
            first = next(r for r in records if r["id"] == cell_id(cell) and r["seed"] == 1)
            if first.get("verdict") not in RED:
                break
            seed += 1
    Path(args.table).write_text(table(records, args.seconds))
    print(f"table: {args.table}; runs and txn-matrix.json: {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
