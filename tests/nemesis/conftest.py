"""A real lab named "nem" (or $GREGOR_LAB) for the nemesis tests, shared by the modules,
and a context that records nemesis events into a list as `gregor run` would
into history.jsonl."""

from __future__ import annotations

import os
import pytest


def lab_name() -> str:
    return os.environ.get("GREGOR_LAB", "nem")


class _LabKeeper:
    """One lab at a time for the whole session, rebuilt only when a module
    asks for other broker settings (bringing a lab up takes ~12 s)."""

    def __init__(self):
        self.current = None
        self.owned = False

    def get(self, overrides: dict):
        from harness.errors import GregorError
        from harness.kafka_config import default_settings
        from harness.lab import Lab

        name = lab_name()
        try:
            found = self.current or Lab.attach(name)
            if found.broker_config != {**default_settings(len(found.nodes)), **overrides}:
                raise GregorError("the running lab has other broker settings")
            found.heal_all()
            found.wait_healthy(timeout=60)
        except GregorError:
            self.current = None
            Lab.down(name, progress=lambda _m: None)
            found = Lab.up(nodes=3, name=name, broker_overrides=overrides, progress=print)
            self.owned = True
        self.current = found
        return found

    def close(self):
        if self.current is None:
            return
        self.current.heal_all()
        if self.owned and not os.environ.get("GREGOR_KEEP_LAB"):
            from harness.lab import Lab

            Lab.down(self.current.name, progress=lambda _m: None)


@pytest.fixture(scope="session")
def lab_keeper():
    keeper = _LabKeeper()
    yield keeper
    keeper.close()


@pytest.fixture(scope="module")
def lab(request, lab_keeper):
    """The lab, healthy, with the broker settings the module asks for (its
    LAB_OVERRIDES); brought up here unless already up, taken down at the end
    of the session if it was brought up here."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    found = lab_keeper.get(dict(getattr(request.module, "LAB_OVERRIDES", {})))
    yield found
    found.heal_all()
