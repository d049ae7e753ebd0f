"""ruff's lint and format (pyproject.toml) hold over the whole tree: a lint
error or an unformatted file fails the suite, and so CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_finds_no_lint_error():
    result = ruff("check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_file_is_formatted_as_ruff_formats_it():
    result = ruff("format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_does_fail_on_a_lint_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "F401" in result.stdout
