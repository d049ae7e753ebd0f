"""A fast subset of the guarantee catalogue, end to end on the default backend
and system: each claim's unsafe side shows an expected anomaly and its safe
side none that is bad, with fixed seeds; the page and the summary are written.

Runs are shorter than the catalogue's 60 s (GREGOR_SCENARIOS_TEST_S, default
30: long enough for a fault and the writes after its heal) to keep the suite
lean; the full table is benchmarks/bench_scenarios.py. A side whose claim has
a nemesis must have had a fault: a run with none proves nothing either way.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from backend_params import lab_name

from ground.faults import INJECTED_STARTS

pytestmark = pytest.mark.lab

CLAIMS = ("acks", "read-committed", "zombie-fencing")
SECONDS = os.environ.get("GREGOR_SCENARIOS_TEST_S", "30")


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    store = tmp_path_factory.mktemp("scenarios") / "store"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "scenarios",
            "--only",
            ",".join(CLAIMS),
            "--runs",
            "1",
            "--seed",
            "1",
            "--time-limit",
            SECONDS,
            "--lab",
            lab_name("scn"),
            "--store",
            str(store),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    directory = next((store / "scenarios").iterdir())
    return directory, json.loads((directory / "scenarios.json").read_text()), result.stdout


@pytest.mark.parametrize("name", CLAIMS)
def test_the_unsafe_side_breaks_the_promise_and_the_safe_side_keeps_it(catalogue, name):
    directory, summary, _ = catalogue
    claim = next(c for c in summary["claims"] if c["name"] == name)
    unsafe, safe = claim["sides"]["unsafe"]["runs"][0], claim["sides"]["safe"]["runs"][0]
    assert unsafe["error"] is None and safe["error"] is None, (unsafe.get("error"), safe.get("error"))
    for side, run in (("unsafe", unsafe), ("safe", safe)):
        history = (directory / run["report"]).parent / "history.jsonl"
        test = json.loads(history.with_name("test.json").read_text())
        if test["nemesis"].get("faults"):
            assert faults_started(history), f"{name}: the {side} run ended before its nemesis started a fault"
    assert unsafe["detected"], f"{name}: unsafe side showed {unsafe['anomalies']}, none of {claim['expected']}"
    if not safe["clean"] and name == "read-committed":
        reuse = sequence_reuse_losses((directory / safe["report"]).parent, safe["bad"])
        if reuse:  # a finding about Kafka 3.9.1 and librdkafka, not about Gregor: shown, not failed
            warnings.warn(f"{name}: safe side lost writes as docs/SCENARIOS.md describes: {reuse}", stacklevel=2)
            return
    assert safe["clean"], f"{name}: safe side showed bad anomalies {safe['bad']}"
    assert (directory / unsafe["report"]).exists() and (directory / safe["report"]).exists()


# docs/SCENARIOS.md, read-committed: a transaction that fails _TIMED_OUT after
# its record reached the log lets the same producer's next transaction be
# acknowledged at that record's offset, and that write is lost (4 of 30
# catalogue runs, then this test's own run on 2026-11-27). What else it leaves:
# the rest of that transaction read (torn), and readers passing the
# acknowledged offset (poll skips). The test then passes with a warning.
SEQUENCE_REUSE = {"lost-write", "torn-transaction", "poll-skip", "int-poll-skip", "inconsistent-offsets"}


def sequence_reuse_losses(run_dir: Path, bad: list) -> list:
    """The (key, value) of each lost write when every bad anomaly of the run
    fits that finding, else []: each lost write was sent by an `ok`
    transaction, and its process's transaction before it with a send to
    that key (that partition's sequence numbers) failed _TIMED_OUT; every
    bad instance is on such a key."""
    anomalies = json.loads((run_dir / "results.json").read_text())["anomalies"]
    if "lost-write" not in bad or not set(bad) <= SEQUENCE_REUSE:
        return []
    if any(anomalies[name]["count"] != len(anomalies[name]["examples"]) for name in bad):
        return []  # not every instance is in the examples
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines() if line.strip()]
    txns: dict = {}
    for event in events:
        if event.get("f") == "txn" and event.get("type") in ("ok", "fail", "info"):
            txns.setdefault(event["process"], []).append(event)

    def sends(op, key, value=None):
        return any(
            m.get("f") == "send" and m.get("key") == key and value in (None, m.get("value"))
            for m in op.get("mops") or []
        )

    lost = []
    for example in anomalies["lost-write"]["examples"]:
        key, value = example["key"], example["value"]
        to_key = [[op for op in ops if sends(op, key)] for ops in txns.values()]
        if not any(
            op["type"] == "ok"
            and sends(op, key, value)
            and before["type"] == "fail"
            and before.get("error") == "_TIMED_OUT"
            for ops in to_key
            for before, op in zip(ops, ops[1:])
        ):
            return []
        lost.append((key, value))
    keys = {key for key, _ in lost}
    if any(example.get("key") not in keys for name in bad for example in anomalies[name]["examples"]):
        return []
    return lost


def faults_started(history: Path) -> int:
    events = (json.loads(line) for line in history.read_text().splitlines() if line.strip())
    return sum(1 for e in events if e.get("process") == "nemesis" and e.get("f") in INJECTED_STARTS)


def test_the_page_and_the_summary_are_written(catalogue):
    directory, summary, stdout = catalogue
    assert summary["finished"] and [c["name"] for c in summary["claims"]] == list(CLAIMS)
    page = (directory / "index.html").read_text()
    assert all(f'id="{name}"' in page for name in CLAIMS)
    assert "scenarios: " + str(directory / "index.html") in stdout
