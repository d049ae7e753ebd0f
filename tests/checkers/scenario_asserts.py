"""Assertions shared by test_partition_anomalies.py and test_order.py."""

from __future__ import annotations

from checker_histories import named
from partition_scenarios import anomaly_name


def _matches(row: dict, want: dict) -> bool:
    for field, value in want.items():
        if field == "ops":
            if sorted(row["ops"] or []) != sorted(value):
                return False
        elif row.get(field) != value:
            return False
    return True


def assert_reported(findings, scenario: str) -> None:
    found, expected = findings
    want = expected[scenario]
    instances = named(found, anomaly_name(scenario), want["key"])
    assert instances, f"{scenario} not reported; found {found}"
    assert any(_matches(row, want) for row in instances), f"{scenario}: want {want}, got {instances}"


def assert_not_reported(findings, scenario: str) -> None:
    found, expected = findings
    assert named(found, anomaly_name(scenario), expected[scenario]["key"]) == []
