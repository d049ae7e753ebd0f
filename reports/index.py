"""store/index.html: every run in the store, newest first, linking to its report.

A run is a directory store/<test>/<time>/ holding test.json; its verdict and
anomaly counts come from its results.json (a run without one is listed as
not checked). Links are relative so the store can be copied or served.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

from ground.atomic import write_atomic
from ground.errors import GregorError
from reports.markup import esc
from reports.render import faults_text, ordered_anomalies
from reports.stored_run import load_run
from reports.style import CSS


def find_runs(store: Path) -> list[Path]:
    """Run directories store/<test>/<time> with a test.json (symlinks such as store/latest skipped)."""
    runs = []
    for test_dir in sorted(p for p in store.iterdir() if p.is_dir() and not p.is_symlink()):
        for run_dir in test_dir.iterdir():
            if run_dir.is_dir() and not run_dir.is_symlink() and (run_dir / "test.json").exists():
                runs.append(run_dir)
    return runs


def started_at(run_dir: Path) -> float:
    """When the run started: from its directory name if it is a timestamp, else test.json's mtime."""
    digits = re.sub(r"[^0-9]", "", run_dir.name)
    if len(digits) >= 14:
        try:
            return datetime.strptime(digits[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    return (run_dir / "test.json").stat().st_mtime


def _row(store: Path, run_dir: Path) -> str:
    run = load_run(run_dir)
    link_target = run_dir / "report.html"
    relative = os.path.relpath(link_target if link_target.exists() else run_dir, store)
    label = f"{run_dir.parent.name}/{run_dir.name}"
    link = f'<a href="{esc(relative)}">{esc(label)}</a>'
    if not link_target.exists():
        link += ' <span class="missing">(no report yet)</span>'
    verdict = run.verdict if run.results else "not checked"
    counts = []
    for name, anomaly in ordered_anomalies(run):
        kind = "permitted" if anomaly.get("allowed") else "bad"
        counts.append(f'<span class="badge {kind}">{esc(name)} {esc(anomaly.get("count", "?"))}</span>')
    when = datetime.fromtimestamp(started_at(run_dir), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<tr class="run {esc(verdict.replace(" ", "-"))}"><td>{link}</td><td>{when}</td>'
        f"<td>{esc(run.test.get('system'))}</td>"
        f"<td>{esc(run.test.get('version'))}</td><td>{esc(run.test.get('workload'))}</td><td>{esc(faults_text(run))}</td>"
        f'<td class="verdict">{esc(verdict)}</td><td>{" ".join(counts) or "none"}</td></tr>'
    )


INDEX_CSS = """
tr.run.invalid td.verdict{background:#c0172b;color:#fff;font-weight:800}
tr.run.valid td.verdict{background:#1e7e34;color:#fff;font-weight:800}
tr.run.unknown td.verdict{background:#e0a800;font-weight:800}
tr.run.not-checked td.verdict{color:#777;font-style:italic}
.badge{margin:1px}
"""


def write_index(store_dir) -> Path:
    """Writes store_dir/index.html and returns its path."""
    store = Path(store_dir)
    if not store.is_dir():
        raise GregorError(f"{store} is not a directory; give the store directory (e.g. store/)")
    runs = sorted(find_runs(store), key=started_at, reverse=True)
    rows = "".join(_row(store, run_dir) for run_dir in runs)
    table = (
        "<table><thead><tr><th>run</th><th>started</th><th>system</th><th>version</th><th>workload</th><th>faults</th>"
        "<th>verdict</th><th>anomalies (red: bad, grey: permitted)</th></tr></thead><tbody>" + rows + "</tbody></table>"
        if runs
        else '<p class="note">No runs in this store yet.</p>'
    )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        "<title>Gregor runs</title>"
        f"<style>{CSS}{INDEX_CSS}</style></head><body><section><h2>Gregor runs ({len(runs)}), newest first</h2>"
        f"{table}</section></body></html>\n"
    )
    path = store / "index.html"
    write_atomic(path, page)
    return path
