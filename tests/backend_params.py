"""The backends the lab tests run on ($GREGOR_TEST_BACKENDS, default local and
docker), and the names of the test labs."""

from __future__ import annotations

import os


def test_backends() -> list[str]:
    return [b.strip() for b in os.environ.get("GREGOR_TEST_BACKENDS", "local,docker").split(",") if b.strip()]


test_backends.__test__ = False  # a helper, not a test


def lab_name(base: str) -> str:
    """A test lab's name, behind $GREGOR_TEST_LAB_PREFIX: engineers who run lab
    tests side by side on one machine give each checkout its own prefix."""
    return os.environ.get("GREGOR_TEST_LAB_PREFIX", "") + base
