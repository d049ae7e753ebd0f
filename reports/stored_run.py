"""Reading one run directory for a report: tolerant of old or partial runs.

A report must render whatever a run left behind (a crashed run may have no
results.json, an older checker fewer fields), so every reader here returns
defaults and records a note instead of failing; only a directory that is
not a run at all is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ground.errors import GregorError

EVIDENCE_FILE = Path("evidence") / "segments.json"  # the brokers' batches (harness/controller/evidence.py)
# the instances shown beside their batches (unseen: an acknowledged write never read, whose
# offset the broker may hold something else at; docs/findings/librdkafka-abort-sequence-reuse.md)
EVIDENCE_ANOMALIES = ("lost-write", "unseen", "aborted-read", "duplicate")


@dataclass
class Run:
    """What a report needs from a run directory; `notes` lists what was missing."""

    directory: Path
    test: dict
    results: dict
    notes: list[str] = field(default_factory=list)
    # evidence/segments.json; {} when the run has none (an older run, or one not made by `gregor run`)
    evidence: dict = field(default_factory=dict)

    @property
    def history_path(self) -> Path:
        return self.directory / "history.jsonl"

    @property
    def verdict(self) -> str:
        verdict = self.results.get("verdict")
        return verdict if verdict in ("valid", "invalid", "unknown") else "unknown"

    @property
    def anomalies(self) -> dict[str, dict]:
        anomalies = self.results.get("anomalies")
        if not isinstance(anomalies, dict):
            return {}
        out = {}
        for name, anomaly in anomalies.items():
            anomaly = dict(anomaly) if isinstance(anomaly, dict) else {}
            examples = anomaly.get("examples")
            anomaly["examples"] = [e for e in examples if isinstance(e, dict)] if isinstance(examples, list) else []
            out[str(name)] = anomaly
        return out

    def section(self, name: str) -> dict:
        """A results.json object field, {} when missing or of the wrong type."""
        value = self.results.get(name)
        return value if isinstance(value, dict) else {}

    def key_location(self, key) -> str | None:
        """'topic-partition' for a logical key, from test.json's key map."""
        keys = self.test.get("keys")
        if not isinstance(keys, dict) or key is None:
            return None
        where = keys.get(str(key))
        if isinstance(where, (list, tuple)) and len(where) == 2:
            return f"{where[0]}-{where[1]}"
        return None


def _read_json(path: Path, notes: list[str]) -> dict:
    if not path.exists():
        notes.append(f"{path.name} is missing")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        notes.append(f"{path.name} could not be read ({error})")
        return {}
    if not isinstance(data, dict):
        notes.append(f"{path.name} is not a JSON object")
        return {}
    return data


def load_run(run_dir: str | Path) -> Run:
    """Loads test.json and results.json of ``run_dir``; GregorError if it is no run."""
    directory = Path(run_dir)
    if not directory.is_dir():
        raise GregorError(f"{directory} is not a directory; give a run directory such as store/<test>/<time>")
    if not (directory / "test.json").exists() and not (directory / "results.json").exists():
        raise GregorError(
            f"{directory} has neither test.json nor results.json; give a run directory such as store/<test>/<time>"
        )
    notes: list[str] = []
    test = _read_json(directory / "test.json", notes)
    results = _read_json(directory / "results.json", notes)
    if not results:
        notes.append(f"no checker results: run `gregor check {directory}` and then `gregor report {directory}`")
    evidence = _read_json(directory / EVIDENCE_FILE, notes) if (directory / EVIDENCE_FILE).exists() else {}
    return Run(directory=directory, test=test, results=results, notes=notes, evidence=evidence)
