"""Each fault kind is defined once, in ground/faults.py.

Its name and its history `f` values stand nowhere else as a string in the
project's code: everything else reads the table. The few strings that only
look like a fault (a shell command, a column name) are listed below with
what they really are.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from ground import faults

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ground", "harness", "workloads", "nemesis", "checkers", "reports", "benchmarks", "vagrant")
TABLE = "ground/faults.py"

# (file, string): what the string is there, since it is not a fault.
NOT_A_FAULT = {
    ("harness/netfaults.py", "netem"): "tc's qdisc named netem",
    ("harness/backends/netns.py", "netem"): "tc's qdisc named netem (probing the kernel for it)",
    ("nemesis/netem.py", "netem"): "the history value's field holding the netem arguments",
    ("checkers/nemesis_windows.py", "netem"): "the history value's field holding the netem arguments",
    ("harness/node.py", "kill"): "the kill(1) command",
    ("harness/backends/ssh.py", "kill"): "the kill(1) command, in the list of commands a host must have",
    ("harness/systems/tansu/postgres.py", "start"): "pg_ctl's start command",
    ("reports/svg.py", "start"): "SVG's text-anchor value",
    ("checkers/fastload.py", "partition"): "a column: the Spark partition a summary came from",
    ("checkers/pictures.py", "partition"): "the Kafka partition number of a key",
    ("reports/render.py", "partition"): "the Kafka partition number of a key",
    ("harness/controller/evidence.py", "partition"): "the Kafka partition number of a key",
    ("benchmarks/bench_report.py", "partition"): "the Kafka partition number of a key",
    ("harness/wire/frames.py", "partition"): "the Kafka partition a parsed request names",
}


def fault_words() -> set[str]:
    words = set()
    for kind in faults.FAULT_KINDS:
        words |= {kind.name, kind.start} | ({kind.heal} if kind.heal else set())
    return words


def strings_in(path: Path, words: set[str]) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
            found.append((node.lineno, node.value))
    return found


def test_fault_names_and_f_values_stand_only_in_the_fault_table():
    words = fault_words()
    stray, seen = [], set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == TABLE:
                continue
            for line, word in strings_in(path, words):
                if (rel, word) in NOT_A_FAULT:
                    seen.add((rel, word))
                else:
                    stray.append(f"{rel}:{line}: {word!r}")
    assert stray == [], "fault names or f values outside ground/faults.py:\n" + "\n".join(stray)
    assert seen == set(NOT_A_FAULT), f"stale NOT_A_FAULT entries: {sorted(set(NOT_A_FAULT) - seen)}"


def test_the_scan_sees_a_fault_name_written_as_a_string(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('record({"f": "start-partition"})\nx = "partitioned"\n')
    assert strings_in(sample, fault_words()) == [(1, "start-partition")]


@pytest.mark.parametrize("kind", [k for k in faults.FAULT_KINDS if k.module], ids=lambda k: k.name)
def test_every_injectable_fault_has_a_module_that_starts_and_heals_it(kind):
    module = importlib.import_module(kind.module)
    assert callable(getattr(module, "start", None)) and callable(getattr(module, "heal", None))


def test_names_and_f_values_are_unique():
    names = [k.name for k in faults.FAULT_KINDS]
    starts = [k.start for k in faults.FAULT_KINDS]
    heals = [k.heal for k in faults.FAULT_KINDS if k.heal]
    assert len(set(names)) == len(names)
    assert len(set(starts)) == len(starts)
    assert len(set(heals)) == len(heals)
    assert not set(starts) & set(heals)


def test_composites_are_made_of_faults_in_the_table():
    for kind in faults.FAULT_KINDS:
        assert set(kind.parts) <= set(faults.BY_NAME), kind.name
    assert faults.with_composites([faults.PARTITION, faults.KILL]) >= {faults.LONE_LEADER}
    assert faults.LONE_LEADER not in faults.with_composites([faults.PARTITION])


def test_report_colours_follow_the_table_and_guess_only_unknown_f_values():
    for kind in faults.FAULT_KINDS:
        assert faults.chart_of(kind.start) == kind.chart
        assert kind.chart in faults.CHART_COLOURS
    assert faults.chart_of("crash-node") == "kill"  # another tool's history
    assert faults.chart_of("something-else") == "other"
