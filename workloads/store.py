"""The store directory of runs: store/<test>/<start-time>/ and store/latest."""

from __future__ import annotations

import os
import time

from ground import atomic


def new_run_dir(store: str, test_name: str, start_wall: float | None = None) -> str:
    """Creates store/<test>/<start-time>/ (unique even for runs in the same second)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(start_wall or time.time()))
    base = os.path.join(os.path.abspath(store), test_name)
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, stamp)
    suffix = 1
    while True:
        try:
            os.mkdir(path)
            break
        except FileExistsError:
            suffix += 1
            path = os.path.join(base, f"{stamp}-{suffix}")
    point_latest(store, path)
    return path


def point_latest(store: str, run_dir: str) -> None:
    """Atomically points store/latest at run_dir (relative link, so the store can move)."""
    store = os.path.abspath(store)
    link = os.path.join(store, "latest")
    tmp = os.path.join(store, f".latest.{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.relpath(run_dir, store), tmp)
    os.replace(tmp, link)


def write_json(path: str, data: dict) -> None:
    """Writes JSON atomically (temp file + rename): a reader never sees half a file."""
    atomic.write_json(path, data, indent=1)
