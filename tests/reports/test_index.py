"""store/index.html: every run, newest first, with verdict and anomaly counts."""

from __future__ import annotations

import html
import json
import re

from conftest import SCRIPT, make_run

from harness.cli import main
from reports.index import write_index


def test_lists_every_run_newest_first_with_verdict_and_counts(tmp_path):
    store = tmp_path / "store"
    make_run(store / "kafka-a" / "20261120T100000", verdict="valid", name="kafka-a")
    make_run(store / "kafka-b" / "20261122T090000", verdict="invalid", name="kafka-b")
    make_run(store / "kafka-a" / "20261121T100000", with_results=False, name="kafka-a")
    (store / "latest").symlink_to(store / "kafka-b" / "20261122T090000")
    assert main(["report", str(store / "kafka-b" / "20261122T090000")]) == 0
    page = (store / "index.html").read_text()
    order = re.findall(r'<tr class="run ([a-z-]+)"><td><a href="([^"]+)"', page)
    assert "2026-11-22 09:00 UTC" in page
    assert order == [
        ("invalid", "kafka-b/20261122T090000/report.html"),
        ("not-checked", "kafka-a/20261121T100000"),
        ("valid", "kafka-a/20261120T100000"),
    ]
    assert "lost-write 3" in page and "duplicate 2" in page
    assert "kafka</td><td>3.9.1</td><td>send</td><td>kill, partition</td>" in page
    assert "Gregor runs (3)" in page


def test_index_escapes_and_empty_store(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    assert "No runs" in write_index(store).read_text()
    run = make_run(store / "t" / "20261122T090000")
    test = json.loads((run / "test.json").read_text())
    test["workload"] = SCRIPT
    (run / "test.json").write_text(json.dumps(test))
    page = write_index(store).read_text()
    assert "<script" not in page
    assert f"<td>{html.escape(SCRIPT, quote=True)}</td>" in page


def test_index_command_on_missing_store_is_an_error(tmp_path):
    assert main(["index", str(tmp_path / "nope")]) == 2
