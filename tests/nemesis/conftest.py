"""A real lab named "nem" (or $GREGOR_LAB) for the nemesis tests, one per module,
and a context that records nemesis events into a list as `gregor run` would
into history.jsonl."""

from __future__ import annotations

import os
import pytest


def lab_name() -> str:
    return os.environ.get("GREGOR_LAB", "nem")


@pytest.fixture(scope="module")
def lab(request):
    """The lab, healthy; brought up (and taken down) here unless already up
    with the broker settings the module asks for (its LAB_OVERRIDES)."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    from harness.errors import GregorError
    from harness.kafka_config import default_settings
    from harness.lab import Lab

    name = lab_name()
    overrides = dict(getattr(request.module, "LAB_OVERRIDES", {}))
    try:
        found = Lab.attach(name)
        if found.broker_config != {**default_settings(len(found.nodes)), **overrides}:
            raise GregorError("the running lab has other broker settings")
        found.heal_all()
        found.wait_healthy(timeout=60)
        owned = False
    except GregorError:
        Lab.down(name, progress=lambda _m: None)
        found = Lab.up(nodes=3, name=name, broker_overrides=overrides, progress=print)
        owned = True
    yield found
    found.heal_all()
    if owned and not os.environ.get("GREGOR_KEEP_LAB"):
        Lab.down(name, progress=lambda _m: None)
