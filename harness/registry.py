"""Backends and systems by name: the one place that knows which exist.

Modules are imported on first use, so `gregor lab up` on the local backend
never imports the Docker SDK, and a missing optional dependency only
matters to the backend or system that needs it.
"""

from __future__ import annotations

import importlib

from ground.errors import GregorError

BACKENDS = {
    "local": "harness.backends.local:LocalBackend",
    "docker": "harness.backends.docker:DockerBackend",
    "ssh": "harness.backends.ssh:SshBackend",
}
SYSTEMS = {
    "kafka": "harness.systems.kafka.system:KafkaSystem",
    "kfake": "harness.systems.kfake.system:KfakeSystem",
    "tansu": "harness.systems.tansu.system:TansuSystem",
    "external": "harness.systems.external.system:ExternalSystem",
}
# A lab name per backend by default, so a local and a docker lab coexist
# without the user naming either.
DEFAULT_LAB = {"local": "gregor", "docker": "gdocker", "ssh": "gssh"}


def _load(table: dict[str, str], name: str, what: str):
    if name not in table:
        raise GregorError(f"unknown {what} {name!r}; choose one of {', '.join(table)}")
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def backend(name: str, **options):
    """A backend instance (options: what its command-line flags gave)."""
    return _load(BACKENDS, name, "backend")(**options)


def backend_class(name: str):
    return _load(BACKENDS, name, "backend")


def system_class(name: str):
    return _load(SYSTEMS, name, "system")


def restore_system(state: dict):
    """The system of a running lab, from its part of the state file."""
    return system_class(state["name"]).restore(state)


def default_lab_name(backend_name: str) -> str:
    return DEFAULT_LAB.get(backend_name, "gregor")
