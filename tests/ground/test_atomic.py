"""ground/atomic.py: a reader sees the old file or the new one, and a failed write leaves no temp file."""

from __future__ import annotations

import json
import os

import pytest

from ground import atomic


def test_write_json_replaces_the_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old\n")
    atomic.write_json(path, {"when": object()}, default=lambda _o: "an object")
    assert json.loads(path.read_text()) == {"when": "an object"}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temp(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text("old\n")

    def full_disk(_src, _dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_json(path, {"new": 1})
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
