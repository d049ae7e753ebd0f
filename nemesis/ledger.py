"""The on-disk list of faults in force, so a crashed run can be healed.

An entry is written BEFORE its fault is applied and removed after its heal;
whatever is left after a crash (SIGKILL, power loss of the harness) is
exactly what the next `gregor run` or `gregor lab down` must undo.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

from ground.atomic import write_json
from ground.paths import state_dir


def ledger_path(lab_name: str) -> Path:
    return state_dir() / f"{lab_name}-faults.json"  # beside the lab's state file


class Ledger:
    """Active faults of one lab, one JSON list, replaced atomically."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    @classmethod
    def for_lab(cls, lab_name: str) -> "Ledger":
        return cls(ledger_path(lab_name))

    def entries(self) -> list[dict]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (json.JSONDecodeError, OSError):
            # a torn file cannot happen (atomic rename), but never let a
            # damaged ledger stop a heal: the lab-wide heal still runs
            return []
        return data if isinstance(data, list) else []

    def add(self, entry: dict) -> dict:
        entry = dict(entry, id=entry.get("id") or uuid.uuid4().hex[:12])
        with self._lock:
            self._write(self.entries() + [entry])
        return entry

    def remove(self, entry_id: str) -> None:
        with self._lock:
            self._write([e for e in self.entries() if e.get("id") != entry_id])

    def clear(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)

    def _write(self, entries: list[dict]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        write_json(self.path, entries, indent=None, fsync=True)
