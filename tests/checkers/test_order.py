"""Poll and send order anomalies (across ops and inside one op): each found in a
history that has it, absent from a near-identical one (a reset by assign,
subscribe or rebalance in between, or the values in order)."""

from __future__ import annotations

import pytest
from scenario_asserts import assert_not_reported, assert_reported

pytestmark = pytest.mark.spark

SCENARIOS = [
    "poll-skip",
    "poll-skip-rebalance",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-send-skip",
    "int-nonmonotonic-send",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_order_anomaly_reported_with_key_value_offset_and_ops(scenarios_present, scenario):
    assert_reported(scenarios_present, scenario)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_order_anomaly_absent_after_reset_or_in_order(scenarios_absent, scenario):
    assert_not_reported(scenarios_absent, scenario)
