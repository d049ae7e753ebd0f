"""Fixtures shared by every folder: labs kept for the session, one per backend.

The nemesis and workload lab tests are parametrised over the backends that
backend_params.py lists, so each property is shown on every backend by the
same test, never by a copy of it. A test marked `first_backend_only` shows
something the backend does not change (a workload's own logic, a broker
setting's effect): it runs on the first backend only, unless
$GREGOR_TEST_EVERY_BACKEND is set. That keeps CI within its time.
"""

from __future__ import annotations

import os

import pytest
from backend_params import test_backends


class LabKeeper:
    """One lab per backend for the whole session, rebuilt only when a module
    asks for other broker settings (bringing a lab up takes 5-15 s)."""

    def __init__(self, names: dict[str, str], options=lambda backend: {}):
        self.names = names  # backend -> lab name
        self.options = options  # backend -> what it must be given (the SSH backend: its hosts)
        self.current: dict = {}  # backend -> Lab
        self.owned: set[str] = set()

    def get(self, backend: str, overrides: dict):
        from ground.errors import GregorError
        from harness.lab import Lab

        name = self.names[backend]
        try:
            found = self.current.get(backend) or Lab.attach(name, backend=backend)
            if found.backend.name != backend or found.system.overrides != overrides:
                raise GregorError("the running lab is another one")
            found.heal_all()
            found.wait_healthy(timeout=60)
        except GregorError:
            self.current.pop(backend, None)
            Lab.down(name, progress=lambda _m: None, backend=backend, backend_options=self.options(backend))
            found = Lab.up(
                nodes=3,
                name=name,
                broker_overrides=overrides,
                progress=print,
                backend=backend,
                backend_options=self.options(backend),
            )
            self.owned.add(backend)
        self.current[backend] = found
        return found

    def close(self):
        from harness.lab import Lab

        for backend, lab in self.current.items():
            lab.heal_all()
            if backend in self.owned and not os.environ.get("GREGOR_KEEP_LAB"):
                Lab.down(lab.name, progress=lambda _m: None, backend=backend)


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory):
    """Hosts with real sshd for the SSH backend, started on first use (tests/ssh_hosts.py)."""
    from ssh_hosts import SshHosts

    hosts = SshHosts(tmp_path_factory.mktemp("ssh-hosts"))
    yield hosts
    hosts.stop()


@pytest.fixture(scope="session")
def lab_keeper(ssh_hosts):
    from backend_params import lab_name

    keeper = LabKeeper(
        {"local": lab_name("nem"), "docker": lab_name("nemd"), "ssh": lab_name("nems")},
        options=lambda backend: ssh_hosts.options() if backend == "ssh" else {},
    )
    yield keeper
    keeper.close()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "first_backend_only: backend-independent; runs on the first "
        "backend only unless GREGOR_TEST_EVERY_BACKEND is set",
    )


def pytest_collection_modifyitems(config, items):
    """Deselects the other backends' copies of `first_backend_only` tests."""
    if os.environ.get("GREGOR_TEST_EVERY_BACKEND"):
        return
    first = (test_backends() or [None])[0]
    dropped = [
        item
        for item in items
        if item.get_closest_marker("first_backend_only")
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("lab", first) != first
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
