"""`gregor run` against an older tree: the same arguments give the same parse,
configuration, topics, client specs and test.json, or the same error.

Run it with pytest, naming the other copy of Gregor (with its own .venv):

    GREGOR_BASELINE=../old-gregor .venv/bin/pytest benchmarks/diff_run_config.py

It is a comparison between two trees, not a test of one, so it lives here
and not in the suite. The older
tree's configuration is a dict, this tree's a RunConfig: each key of the
dict must be a field with the same value. This tree's test.json has one key
more, "run" (the whole resolved configuration), which must give the same
configuration again when passed back through `gregor run`'s parser.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ground.faults import KILL, KILL_CLIENT, PARTITION, PAUSE, POWER_LOSS
from harness.controller import catalogue
from harness.controller.demo import demo_arguments

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).with_name("run_snapshot.py")
BASELINE = os.environ.get("GREGOR_BASELINE")

if not BASELINE:
    raise SystemExit("benchmarks/diff_run_config.py: set GREGOR_BASELINE to the root of another copy of Gregor")

NUMBERS = (
    "time-limit",
    "concurrency",
    "rate",
    "seed",
    "keys",
    "partitions-per-topic",
    "topics",
    "batch",
    "nodes",
    "drain-time-limit",
    "max-in-flight",
    "retries",
    "transaction-timeout-ms",
    "min-insync-replicas",
    "replication-factor",
    "process-ms",
    "hang-s",
    "txn-hold-ms",
    "nemesis-interval",
    "nemesis-hold",
)
BAD_NUMBERS = ("x", "0", "-1", "1.5", "1e9", "nan", "inf", "")

GOOD = [
    ["--workload", "queue"],
    ["--workload", "txn"],
    ["--workload", "zombie"],
    ["--workload", "eos"],
    ["--workload", "group"],
    ["--workload", "txn", "--hang", "inside", "--txn-hold-ms", "200"],
    ["--workload", "txn", "--hang", "between", "--hang-s", "4", "--transaction-timeout-ms", "3000"],
    ["--workload", "zombie", "--zombie-kind", "idempotent", "--resend"],
    ["--workload", "eos", "--copier-offsets", "after", "--process-ms", "50"],
    ["--workload", "eos", "--copier-offsets", "before", "--keys", "5", "--topics", "3"],
    [
        "--workload",
        "queue",
        "--producer-config",
        "linger.ms=5",
        "--producer-config",
        "batch.num.messages=1",
        "--consumer-config",
        "fetch.min.bytes=1",
        "--topic-config",
        "flush.messages=1",
        "--retries",
        "3",
        "--acks",
        "1",
        "--idempotence",
        "false",
        "--max-in-flight",
        "10",
    ],
    ["--workload", "queue", "--acks", "-1"],
    ["--workload", "queue", "--acks", "0", "--idempotence", "false"],
    ["--workload", "group", "--subscribe", "--auto-commit", "--isolation", "read_uncommitted"],
    ["--workload", "txn", "--subscribe", "--isolation", "read_uncommitted"],
    ["--workload", "queue", "--topics", "2", "--keys", "6", "--partitions-per-topic", "4"],
    ["--workload", "queue", "--nodes", "1"],
    ["--workload", "queue", "--nodes", "5", "--replication-factor", "5", "--min-insync-replicas", "3"],
    ["--workload", "queue", "--nodes", "2"],
    ["--workload", "queue", "--client-netns", "--unclean-leader-election", "true"],
    ["--workload", "queue", "--nemesis", POWER_LOSS],
    ["--workload", "queue", "--nemesis", POWER_LOSS, "--data-on", "powerfs"],
    ["--workload", "queue", "--data-on", "powerfs"],
    [
        "--workload",
        "queue",
        "--nemesis",
        "partition,kill",
        "--nemesis-interval",
        "3",
        "--nemesis-targets",
        "leader,one",
        "--nemesis-shape",
        "isolate",
        "--nemesis-hold",
        "2",
    ],
    ["--workload", "queue", "--nemesis", "none"],
    ["--workload", "queue", "--nemesis-interval", "inf"],
    ["--workload", "queue", "--nemesis", "netem,pause"],
    ["--workload", "txn", "--nemesis", KILL_CLIENT, "--nemesis-targets", "client:txn"],
    ["--workload", "txn", "--system", "kfake", "--nemesis", PARTITION],
    ["--workload", "txn", "--system", "kfake", "--nemesis", "partition,pause,kill"],
    ["--workload", "queue", "--system", "external", "--bootstrap", "h:1", "--nemesis", "partition,pause"],
    ["--workload", "queue", "--system", "external", "--bootstrap", "h:1"],
    [
        "--workload",
        "queue",
        "--no-check",
        "--name",
        "my-run.1",
        "--store",
        "/tmp/elsewhere",
        "--seed",
        "9",
        "--time-limit",
        "12.5",
        "--rate",
        "55.5",
        "--concurrency",
        "7",
        "--batch",
        "3",
        "--drain-time-limit",
        "30",
    ],
    ["--workload", "queue", "--client-config", "security.protocol=SSL", "--client-config", "sasl.mechanism=PLAIN"],
    ["--workload", "queue", "--backend", "ssh", "--hosts", "root@a,root@b,root@c", "--insecure-host-keys"],
    ["--workload", "queue", "--backend", "ssh", "--vagrant", "/labs/v", "--ssh-key", "~/k", "--known-hosts", "/k/h"],
    ["--workload", "queue", "--backend", "docker"],
    ["--workload", "queue", "--system", "tansu", "--storage", "memory", "--nodes", "1"],
    ["--workload", "txn", "--controllers", "1", "--transaction-version", "2", "--version", "3.9.1"],
    ["--workload", "queue", "--lab", "other"],
]

BAD = [
    ["--workload", "nosuch"],
    ["--workload", "queue", "--hang", "inside"],
    ["--workload", "queue", "--zombie-kind", "idempotent"],
    ["--workload", "queue", "--copier-offsets", "after"],
    ["--workload", "txn", "--hang", "inside"],
    ["--workload", "queue", "--hosts", "root@a"],
    ["--workload", "queue", "--insecure-host-keys"],
    ["--workload", "queue", "--system", "tansu", "--controllers", "1"],
    ["--workload", "queue", "--system", "external", "--backend", "docker", "--bootstrap", "h:1"],
    ["--workload", "queue", "--system", "external", "--bootstrap", "h:1", "--nemesis", KILL],
    [
        "--workload",
        "queue",
        "--system",
        "external",
        "--bootstrap",
        "h:1",
        "--nemesis",
        PAUSE,
        "--nemesis-targets",
        "leader",
    ],
    ["--workload", "queue", "--client-config", "nosep"],
    ["--workload", "queue", "--client-config", "acks=1"],
    ["--workload", "queue", "--producer-config", "acks=1"],
    ["--workload", "queue", "--producer-config", "linger.ms"],
    ["--workload", "queue", "--consumer-config", "group.id=x"],
    ["--workload", "queue", "--topic-config", "min.insync.replicas=2"],
    ["--workload", "queue", "--topic-config", "=1"],
    ["--workload", "queue", "--nemesis", POWER_LOSS, "--data-on", "disk"],
    ["--workload", "queue", "--replication-factor", "4"],
    ["--workload", "queue", "--nodes", "1", "--min-insync-replicas", "2"],
    ["--workload", "queue", "--name", "a/b"],
    ["--workload", "queue", "--acks", "1"],
    ["--workload", "queue", "--acks", "2"],
    ["--workload", "queue", "--max-in-flight", "6"],
    ["--workload", "eos", "--concurrency", "2"],
    ["--workload", "queue", "--keys", "9", "--topics", "2", "--partitions-per-topic", "4"],
    ["--workload", "queue", "--keys", "3000"],
    ["--workload", "queue", "--nemesis", "explode"],
    ["--workload", "queue", "--nemesis", KILL, "--nemesis-targets", "client"],
    ["--workload", "queue", "--nemesis", PARTITION, "--nemesis-shape", "client-deaf"],
    ["--workload", "queue", "--nemesis", PARTITION, "--nemesis-interval", "inf"],
    ["--workload", "queue", "--nemesis-targets", "leader:k"],
    ["--workload", "queue", "--backend", "vm"],
    ["--workload", "queue", "--system", "nosuch"],
    ["--workload", "queue", "--isolation", "none"],
    ["--workload", "queue", "--lab", "no/slash"],
    ["--workload", "queue", "--unknown-flag", "1"],
    ["--time-limit", "5"],
] + [["--workload", "queue", f"--{flag}", bad] for flag in NUMBERS for bad in BAD_NUMBERS]


def claim_arguments() -> list[list[str]]:
    found = []
    for claim in catalogue.load():
        for side in catalogue.SIDES:
            found.append(claim.run_arguments(side, seed=3, time_limit=20) + ["--data-on", claim.storage])
    return found


def argument_lists() -> list[list[str]]:
    demo = demo_arguments(60, "snap", None, "store")
    return [[*argv, "--lab", "snap"] if "--lab" not in argv else argv for argv in GOOD + BAD + claim_arguments()] + [
        demo
    ]


def snapshots(tree: Path, argvs: list[list[str]]) -> list[dict]:
    python = tree / ".venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GREGOR_LAB")}
    env["PYTHONPATH"] = str(tree)
    result = subprocess.run(
        [str(python if python.exists() else sys.executable), str(SNAPSHOT)],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        timeout=600,
        check=True,
    )
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def compared():
    argvs = argument_lists()
    return argvs, snapshots(Path(BASELINE), argvs), snapshots(ROOT, argvs)


def same(a, b) -> bool:
    """Equal as JSON (so a nan equals a nan)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_same_arguments_give_the_same_run(compared):
    argvs, before, after = compared
    for argv, old, new in zip(argvs, before, after):
        where = " ".join(argv)
        assert old.get("error") == new.get("error"), where
        if "error" in old:
            continue
        assert same(old["namespace"], new["namespace"]), where
        for key, value in old["config"].items():
            assert same(new["config"][key], value), f"{where}: {key}"
        test = dict(new["test"])
        recorded = test.pop("run")
        assert old["test"] == test, where
        assert old["client_order"] == new["client_order"], where
        assert old["broker_order"] == new["broker_order"], where
        assert old["topics"] == new["topics"], where
        assert old["specs"] == new["specs"], where
        assert recorded, where


def test_test_json_run_gives_the_same_configuration_again(compared):
    from harness.controller.run_config import options_to_argv

    argvs, _before, after = compared
    again = snapshots(ROOT, [options_to_argv(new["test"]["run"]) for new in after if "error" not in new])
    for first, second in zip([a for a in after if "error" not in a], again):
        assert "error" not in second, second.get("error")
        config = {k: v for k, v in first["config"].items() if k != "client_config"}
        assert same({k: v for k, v in second["config"].items() if k != "client_config"}, config)
        assert same(second["test"]["run"], first["test"]["run"])


CLAIM_ARGUMENTS = """
import json
from harness.controller import catalogue
print(json.dumps({c.name: {s: c.run_arguments(s, 5, 60.0) for s in catalogue.SIDES} for c in catalogue.load()}))
"""


def test_the_catalogue_gives_the_same_arguments():
    """scenarios.json records each side's arguments, and merging catalogues compares them."""
    found = []
    for tree in (Path(BASELINE), ROOT):
        python = tree / ".venv" / "bin" / "python"
        result = subprocess.run(
            [str(python if python.exists() else sys.executable), "-c", CLAIM_ARGUMENTS],
            capture_output=True,
            text=True,
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            timeout=120,
            check=True,
        )
        found.append(json.loads(result.stdout))
    assert found[0] == found[1] and len(found[1]) >= 13
