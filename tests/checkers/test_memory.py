"""The check's plans hold at any size: no table that grows with the history is broadcast on a guess.

Issue 42's 10M-event transactional history ran the default 1 GB driver out
of memory, because Spark guesses a few bytes for every stored table and so
broadcast whole tables of the history (the distinct reads of every poll).
Reproducing the heap itself running out takes millions of rows: today's
plans checked 1M events of that shape with a 512 MB heap (the smallest
Spark starts with) without failing. So the test scales both down further:
a history of a few thousand events, and the driver's budget for broadcast
tables (checkers/spark.py BROADCAST_HEAP_SHARE) set to nothing. With no
budget, no plan of the check may broadcast anything; a plan that
broadcasts on Spark's guess does so whatever the budget says. The check
must still find every planted anomaly through the joins that replace the
broadcasts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pyspark.sql import DataFrame

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_checkers import found  # noqa: E402
from history_shapes import generate  # noqa: E402

from checkers import spark as spark_module  # noqa: E402
from checkers.check import check_dir  # noqa: E402

pytestmark = pytest.mark.spark


def _planned(spark, monkeypatch) -> list[str]:
    """Records the physical plan of every query the driver collects from."""
    plans: list[str] = []
    frames = type(spark.range(1))  # the session's DataFrame class (pyspark's classic one subclasses DataFrame)
    assert issubclass(frames, DataFrame)
    for name in ("collect", "toArrow"):
        original = getattr(frames, name)

        def recording(self, *args, _original=original, **kwargs):
            result = _original(self, *args, **kwargs)
            plans.append(self._jdf.queryExecution().executedPlan().toString())
            return result

        monkeypatch.setattr(frames, name, recording)
    return plans


@pytest.mark.parametrize("shape", ["txn", "eos"])
def test_no_plan_broadcasts_without_a_budget_and_every_planted_anomaly_is_found(spark, tmp_path, monkeypatch, shape):
    made = generate(shape, tmp_path, 12000)
    monkeypatch.setattr(spark_module, "BROADCAST_HEAP_SHARE", 0, raising=False)
    plans = _planned(spark, monkeypatch)
    results = check_dir(tmp_path, spark, progress=lambda _line: None)
    assert len(plans) > 5  # the finders' queries were seen
    broadcasting = [plan for plan in plans if "BroadcastExchange" in plan or "BroadcastHashJoin" in plan]
    assert broadcasting == [], f"{len(broadcasting)} plans broadcast a table; the first:\n{broadcasting[0]}"
    assert {name: found(results, name, where) for name, where in made["planted"].items()} == {
        name: True for name in made["planted"]
    }
