"""Per-partition and order anomalies: each found with its key, value, offset and ops
in a history that has it, and not reported in a near-identical one that has not."""

from __future__ import annotations

import pytest

from checker_histories import named, rows
from checkers import order, partition
from checkers.load import load
from partition_scenarios import SCENARIOS, anomaly_name, build

pytestmark = pytest.mark.spark


def _found(spark, tmp_path_factory, present):
    history, expected = build(present)
    t = load(history.write(tmp_path_factory.mktemp("present" if present else "absent")), spark)
    return rows(partition.find(t)) + rows(order.find(t)), expected


@pytest.fixture(scope="module")
def present(spark, tmp_path_factory):
    return _found(spark, tmp_path_factory, True)


@pytest.fixture(scope="module")
def absent(spark, tmp_path_factory):
    return _found(spark, tmp_path_factory, False)


def _matches(row: dict, want: dict) -> bool:
    for field, value in want.items():
        if field == "ops":
            if sorted(row["ops"] or []) != sorted(value):
                return False
        elif row.get(field) != value:
            return False
    return True


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_anomaly_reported_with_key_value_offset_and_ops(present, scenario):
    found, expected = present
    want = expected[scenario]
    instances = named(found, anomaly_name(scenario), want["key"])
    assert instances, f"{scenario} not reported; found {found}"
    assert any(_matches(row, want) for row in instances), f"{scenario}: want {want}, got {instances}"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_anomaly_absent_from_near_identical_history(absent, scenario):
    found, expected = absent
    key = expected[scenario]["key"]
    assert named(found, anomaly_name(scenario), key) == []


def test_lost_value_is_not_also_unseen(present):
    found, expected = present
    key = expected["lost-write"]["key"]
    assert named(found, "unseen", key) == []


def test_value_without_position_is_unseen_not_lost(present):
    found, expected = present
    key = expected["unseen-without-offset"]["key"]
    assert named(found, "lost-write", key) == []
