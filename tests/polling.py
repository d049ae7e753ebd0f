"""Waiting in tests for what they are about, not for a fixed time: on a
loaded 2-core machine any fixed sleep is sometimes too short."""

from __future__ import annotations

import time


def wait_until(condition, timeout: float = 10.0, interval: float = 0.05):
    """Calls `condition` until it returns something truthy or `timeout` has
    passed; returns its last value, for the caller to assert on."""
    deadline = time.monotonic() + timeout
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(interval)
    return value
