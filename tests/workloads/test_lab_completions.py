"""Every workload under faults: every completion repeats its invoke's sends.

docs/HISTORY.md: a completion repeats the invoke's mops, also for `fail` and
`info`; their sends stay listed. Faults are what make ops fail or end
unknown (fenced instances, timed-out sends, killed clients), so each
workload runs with the nemesis partitioning, pausing and killing brokers.
One backend suffices: the property belongs to the workloads' clients.
"""

import os

import pytest
from history_rules import problems, unrepeated_sends
from test_lab_runs import gregor_run

pytestmark = pytest.mark.lab

RUN_S = float(os.environ.get("GREGOR_COMPLETIONS_RUN_S", "15"))
WORKLOADS = {
    "queue": ["--concurrency", "4", "--rate", "200", "--batch", "3"],
    "txn": ["--concurrency", "3", "--rate", "60"],
    "zombie": ["--concurrency", "4", "--rate", "40"],
    "eos": ["--concurrency", "4", "--rate", "100", "--keys", "4"],
    "group": ["--concurrency", "4", "--rate", "100", "--auto-commit"],
}


@pytest.fixture(scope="module")
def lab(first_backend_lab):
    return first_backend_lab


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_every_completion_repeats_its_invoke_sends_under_faults(lab, tmp_path, workload):
    _, test, history, _ = gregor_run(
        lab,
        tmp_path,
        workload,
        *WORKLOADS[workload],
        "--nemesis",
        "partition,pause,kill",
        "--nemesis-interval",
        "3",
        "--nemesis-targets",
        "leader,one,coordinator,client",
        "--seed",
        "3",
        seconds=RUN_S,
    )
    applied = [
        e
        for e in history
        if e["process"] == "nemesis" and e["type"] == "info" and not {"skipped", "failed"} & set(e["value"])
    ]
    assert applied, "no fault was applied"
    unsure = [e for e in history if e["type"] in ("fail", "info") and e["process"] != "nemesis"]
    print(f"{workload}: {len(applied)} fault ops, {len(unsure)} fail/info completions")
    assert unrepeated_sends(history) == []
    found = problems(history, test)
    assert found == [], "\n".join(found[:20])
