"""Where Gregor keeps its files on the controller host, in one place.

Read at call time, so tests and users can point any of them elsewhere with
an environment variable.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "GREGOR_STATE_DIR"
DEFAULT_STATE_DIR = "/run/gregor"


def state_dir() -> Path:
    """Lab state files, fault ledgers, client registries: $GREGOR_STATE_DIR,
    else /run/gregor (tmpfs: gone after a reboot, as the labs are)."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


def labs_dir() -> Path:
    """Node homes of local labs (configs, data, logs): $GREGOR_LABS_DIR, else /var/lib/gregor/labs."""
    return Path(os.environ.get("GREGOR_LABS_DIR") or "/var/lib/gregor/labs")


def failed_dir() -> Path:
    """Logs kept from a lab whose setup failed: $GREGOR_FAILED_DIR, else /var/lib/gregor/failed."""
    return Path(os.environ.get("GREGOR_FAILED_DIR") or "/var/lib/gregor/failed")


def clients_dir(lab: str) -> Path:
    """The registry of a lab's client processes, so a crashed run's are found."""
    return Path(os.environ.get("GREGOR_CLIENTS_DIR") or state_dir() / "clients") / lab


def cache_dir() -> Path:
    """Downloads and builds cached per version: $XDG_CACHE_HOME/gregor, else ~/.cache/gregor."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gregor"
