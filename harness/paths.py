"""Where Gregor keeps the state of its labs on this host.

One place for the default, so the lab's state file, the fault ledger and the
netem emulator's logs can never end up in different folders. Read at call
time: tests and users point it elsewhere with $GREGOR_STATE_DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "GREGOR_STATE_DIR"
DEFAULT_STATE_DIR = "/run/gregor"


def state_dir() -> Path:
    """$GREGOR_STATE_DIR, else /run/gregor (tmpfs: gone after a reboot, as the labs are)."""
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)
