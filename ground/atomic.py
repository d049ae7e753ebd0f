"""Writing a file so that a reader never sees half of it: temp file, then rename."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes, fsync: bool = False) -> None:
    """Replaces `path` with `data` in one step (a crash leaves the old or the new file).

    fsync: also survive a power cut of the controller (the fault ledger needs it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write (a full disk) leaves no half file behind
        raise


def write_json(path: str | os.PathLike, data, indent: int | None = 1, fsync: bool = False, default=None) -> None:
    """`data` as JSON, atomically; `default` as json.dumps takes it."""
    write_atomic(path, json.dumps(data, indent=indent, default=default) + "\n", fsync=fsync)
