"""Entering a network namespace from inside a process (setns).

A client process moves itself into its place before it opens any socket;
the namespaces themselves are made by the backends (harness/backends/netns.py).
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNET = 0x40000000


def enter(name: str) -> None:
    """Moves the calling process (a client about to start) into namespace `name`."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)
