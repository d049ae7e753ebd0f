"""The single history writer of a run.

Every event goes through `HistoryWriter.record`, which gives it the next
index and appends it as one JSON line with ONE os.write on an O_APPEND file
descriptor. A crash of the controller therefore leaves a readable prefix:
no buffered lines are lost and lines never interleave. The one exception is
the line being written when a SIGKILL lands: Linux may stop a write at a page
boundary, leaving an unterminated prefix of that line as the file's tail.
Readers leave such a tail out (read_history here, checkers.load.torn_tail).
"""

from __future__ import annotations

import json
import os
import threading
import time


class HistoryWriter:
    """Appends events to history.jsonl with contiguous indices."""

    def __init__(self, path: str, start_ns: int | None = None):
        self.path = path
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._index = 0
        self.counts: dict[str, int] = {}

    def now_ns(self) -> int:
        """Nanoseconds since the test started, on the system-wide monotonic clock."""
        return time.monotonic_ns() - self.start_ns

    def record(self, event: dict) -> dict:
        """Stamps index (and time, if the event has none) and appends it."""
        with self._lock:
            if self._fd is None:
                raise ValueError("history is closed")
            full = {"index": self._index}
            full["time"] = event["time"] if "time" in event else self.now_ns()
            for key, value in event.items():
                if key not in ("index", "time"):
                    full[key] = value
            line = (json.dumps(full, separators=(",", ":")) + "\n").encode()
            written = os.write(self._fd, line)
            while written < len(line):  # regular files write fully; be safe
                written += os.write(self._fd, line[written:])
            self._index += 1
            kind = full.get("type")
            if kind in ("ok", "fail", "info") and full.get("process") != "nemesis":
                self.counts[kind] = self.counts.get(kind, 0) + 1
            return full

    @property
    def size(self) -> int:
        return self._index

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None


def read_history(path: str) -> list[dict]:
    """Every complete line of a history (a trailing partial line is ignored)."""
    events = []
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            events.append(json.loads(raw))
    return events
