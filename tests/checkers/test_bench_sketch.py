"""benchmarks/bench_sketch.py's empty sketch reads every event once per
process pass and every mop once per key pass, or its times bound nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_checkers import generate  # noqa: E402
from bench_sketch import empty_sketch  # noqa: E402

pytestmark = pytest.mark.spark


def test_the_empty_sketch_reads_every_event_and_every_mop(spark, tmp_path):
    events = generate(tmp_path, 3000)["events"]
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    mop_rows = sum(max(1, len(event.get("mops") or [])) for event in lines)
    assert len(lines) == events
    assert mop_rows > events  # the generator's polls and transactions carry several mops
    assert empty_sketch(spark, tmp_path / "history.jsonl") == {"ops": events, "mop_rows": mop_rows}
