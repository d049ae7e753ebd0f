"""Fixtures of the workload tests."""

import os

import pytest
from backend_params import test_backends


@pytest.fixture(scope="module")
def first_backend_lab(lab_keeper):
    """A healthy lab on the first backend under test, for properties of the
    clients rather than of a backend; healed after the module."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    found = lab_keeper.get(test_backends()[0], {})
    yield found
    found.heal_all()
