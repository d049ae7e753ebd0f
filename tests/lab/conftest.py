"""A real 3-node lab, brought up once per module under a lab name of our own."""

from __future__ import annotations

import pytest

from harness.lab import Lab
from lab.helpers import LAB_NAME


@pytest.fixture(scope="module")
def lab():
    Lab.down(LAB_NAME, progress=lambda _m: None)  # a previous crashed run
    lab = Lab.up(nodes=3, name=LAB_NAME, progress=lambda _m: None)
    try:
        yield lab
    finally:
        Lab.down(LAB_NAME, progress=lambda _m: None)
