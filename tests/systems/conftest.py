"""Labs of the systems besides Kafka 3.9.1 for the run tests, and the order
they run in: the Tansu tests last, because setup builds Tansu (over ten
minutes on 2 cores) in the background while the rest of the suite runs."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(session, config, items):
    """Tests marked `tansu_build` (they wait for the Tansu build) go last."""
    waiting = [item for item in items if item.get_closest_marker("tansu_build")]
    if waiting:
        items[:] = [item for item in items if not item.get_closest_marker("tansu_build")] + waiting


def pytest_configure(config):
    config.addinivalue_line("markers", "tansu_build: waits for Tansu's build (ordered last)")


@pytest.fixture(scope="module")
def system_lab():
    """Brings up labs on demand (name, system, options) and takes them down at the end."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    from harness.lab import Lab

    made: list[str] = []

    def up(base: str, **kwargs):
        from backend_params import lab_name

        name = lab_name(base)
        Lab.down(name, progress=lambda _m: None, backend="local")
        lab = Lab.up(name=name, progress=print, backend="local", **kwargs)
        made.append(name)
        return lab

    yield up
    if not os.environ.get("GREGOR_KEEP_LAB"):
        for name in made:
            Lab.down(name, progress=lambda _m: None, backend="local")
