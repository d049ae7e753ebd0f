"""A real lab per backend for the nemesis tests ("nem" local, "nemd" docker),
shared by the modules, and a context that records nemesis events into a list
as `gregor run` would into history.jsonl."""

from __future__ import annotations

import os

import pytest
from backend_params import test_backends


@pytest.fixture(scope="module", params=test_backends())
def lab(request, lab_keeper):
    """The lab on one backend, healthy, with the broker settings the module
    asks for (its LAB_OVERRIDES); brought up here unless already up, taken
    down at the end of the session if it was brought up here."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    found = lab_keeper.get(request.param, dict(getattr(request.module, "LAB_OVERRIDES", {})))
    yield found
    if lab_keeper.current.get(request.param) is found:  # a test may have taken it down on purpose
        found.heal_all()
