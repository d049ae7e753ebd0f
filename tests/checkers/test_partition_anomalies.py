"""Per-partition anomalies: each found with its key, value, offset and ops in a
history that has it, and not reported in a near-identical one that has not.

(Named *_anomalies so it cannot clash with tests/nemesis/test_partitions.py-like
names; the order family is in test_order.py. Both share one loaded history.)
"""

from __future__ import annotations

import pytest
from checker_histories import named
from scenario_asserts import assert_not_reported, assert_reported

pytestmark = pytest.mark.spark

SCENARIOS = [
    "inconsistent-offsets",
    "duplicate",
    "lost-write",
    "unseen",
    "unseen-without-offset",
    "aborted-read",
    "aborted-read-txn",
    "uncommitted-read",
    "precommitted-read",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_anomaly_reported_with_key_value_offset_and_ops(scenarios_present, scenario):
    assert_reported(scenarios_present, scenario)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_anomaly_absent_from_near_identical_history(scenarios_absent, scenario):
    assert_not_reported(scenarios_absent, scenario)


def test_lost_value_is_not_also_unseen(scenarios_present):
    found, expected = scenarios_present
    assert named(found, "unseen", expected["lost-write"]["key"]) == []


def test_value_without_position_is_unseen_not_lost(scenarios_present):
    found, expected = scenarios_present
    assert named(found, "lost-write", expected["unseen-without-offset"]["key"]) == []
