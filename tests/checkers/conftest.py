"""Shared fixtures of the checker tests: one real Spark session and hand-written runs.

`write_run(tmp_path, events, test=None) -> Path` writes history.jsonl (filling
in `index` and `time` where an event leaves them out) and test.json;
`base_test()` is a configuration under which every anomaly is bad. Both are
plain functions here and in checker_histories (importable from test files),
and fixtures of the same names. `History` builds op pairs tersely.
"""

from __future__ import annotations

import pytest
from checker_histories import History, base_test, poll, send, write_run  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session for the whole test run."""
    from checkers.spark import get_spark

    session = get_spark("local[2]", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture(name="write_run")
def write_run_fixture():
    return write_run


@pytest.fixture(name="base_test")
def base_test_fixture():
    return base_test


def _scenario_findings(spark, tmp_path_factory, present):
    from checker_histories import rows
    from partition_scenarios import build

    from checkers import order, partition
    from checkers.load import load

    history, expected = build(present)
    t = load(history.write(tmp_path_factory.mktemp("present" if present else "absent")), spark)
    return rows(partition.find(t)) + rows(order.find(t)), expected


@pytest.fixture(scope="session")
def scenarios_present(spark, tmp_path_factory):
    """(anomaly rows, expected) of the history holding every partition/order scenario."""
    return _scenario_findings(spark, tmp_path_factory, True)


@pytest.fixture(scope="session")
def scenarios_absent(spark, tmp_path_factory):
    """The same for the near-identical history without any of them."""
    return _scenario_findings(spark, tmp_path_factory, False)
