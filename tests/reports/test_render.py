"""report.html from hand-written run directories (no browser: see test_browser.py)."""

from __future__ import annotations

import html
import json
import re
import shutil

from conftest import HOSTILE_ERROR, IMG, SCRIPT, make_run

from harness.cli import main
from reports.render import write_report


def page_of(run_dir) -> str:
    return write_report(run_dir).read_text(encoding="utf-8")


def test_page_is_one_file_without_fetches_or_scripts(invalid_run):
    page = page_of(invalid_run)
    assert "<script" not in page.lower()
    # the only URL is the SVG namespace, which browsers never fetch
    assert set(re.findall(r'https?://[^"\s<]+', page)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(img|iframe|link)\b(?![^>]*href=\"data:)", page)


def test_untrusted_strings_are_escaped_everywhere(invalid_run, planted):
    page = page_of(invalid_run)
    for hostile in (SCRIPT, IMG, HOSTILE_ERROR):
        assert hostile not in page
    assert html.escape(SCRIPT, quote=True) in page  # record value and topic shown as text
    assert html.escape(HOSTILE_ERROR, quote=True) in page  # broker error text from the history
    assert html.escape(f"kill n2 {IMG}", quote=True) in page  # nemesis label, also inside SVG


def test_banner_names_each_bad_anomaly_with_its_count(invalid_run):
    page = page_of(invalid_run)
    assert 'data-verdict="invalid"' in page
    assert "2 bad anomalies: lost-write (3), aborted-read (1)" in page
    assert "permitted by this configuration: duplicate (2)" in page


def test_bad_anomalies_come_before_permitted_ones(invalid_run):
    page = page_of(invalid_run)
    positions = [page.index(f'id="anomaly-{name}"') for name in ("lost-write", "aborted-read", "duplicate")]
    assert positions == sorted(positions)
    assert 'class="anomaly permitted" id="anomaly-duplicate"' in page
    assert "enable.idempotence=false" in page


def test_instances_show_ops_with_process_times_and_outcome(invalid_run):
    page = page_of(invalid_run)
    section = page[page.index('id="anomaly-aborted-read"') : page.index('id="permitted"')]
    assert re.search(r"op \d+: process 0 <b>send</b> <span class=\"outcome fail\">fail</span> \d+\.\d{3}s", section)
    assert re.search(r"op \d+: process 1 <b>poll</b> <span class=\"outcome ok\">ok</span>", section)
    assert html.escape("t-" + SCRIPT + "-0", quote=True) in section  # topic-partition from test.json keys


def test_setup_lists_the_settings_that_decide_guarantees(invalid_run):
    page = page_of(invalid_run)
    setup = page[page.index('id="setup"') : page.index('id="summary"')]
    for label in (
        "backend",
        "storage",
        "acks",
        "enable.idempotence",
        "isolation.level",
        "min.insync.replicas",
        "unclean leader election",
        "auto commit",
        "faults",
        "duration",
        "seed",
    ):
        assert f'<div class="k">{label}</div>' in setup
    assert "kafka 3.9.1" in setup and "kill, partition" in setup
    assert '<div class="k">backend</div><div class="v">docker</div>' in setup


def test_each_anomalous_partition_has_a_log_picture(invalid_run):
    page = page_of(invalid_run)
    for key in ("0", "1", "2"):
        assert f'id="partition-{key}"' in page
    assert page.count('<svg class="plog"') == 3
    assert "status-lost" in page and "status-duplicate" in page and "status-aborted" in page


def test_fault_windows_are_shaded_in_every_time_chart(invalid_run):
    page = page_of(invalid_run)
    charts = re.findall(r'<svg class="chart".*?</svg>', page)
    assert len(charts) == 6  # send: ok, errors, latency; poll: ok, latency (no errors); lag
    for chart in charts:
        assert chart.count('class="fault"') == 2
        assert "partition n1 | n2 n3" in chart


def test_timelines_outline_the_ops_of_each_instance(invalid_run):
    page = page_of(invalid_run)
    assert page.count('<svg class="timeline"') >= 3
    assert 'class="op involved"' in page


def test_run_without_results_renders_unknown_with_a_note(tmp_path):
    run = make_run(tmp_path / "r", with_results=False)
    page = page_of(run)
    assert 'data-verdict="unknown"' in page
    assert "gregor check" in page


def test_minimal_results_render_with_notes_instead_of_charts(tmp_path):
    run = make_run(tmp_path / "r", minimal_results=True)
    page = page_of(run)
    assert 'data-verdict="invalid"' in page
    assert "no stats.timeseries" in page and "no stats.lag" in page and "no Elle section" in page
    assert "no partition pictures" in page


def test_missing_history_still_renders_instances(tmp_path):
    run = make_run(tmp_path / "r")
    (run / "history.jsonl").unlink()
    page = page_of(run)
    assert "history.jsonl is missing" in page
    assert 'id="anomaly-lost-write"' in page


def test_unknown_verdict_says_the_drain_did_not_complete(tmp_path):
    page = page_of(make_run(tmp_path / "r", verdict="unknown"))
    assert 'data-verdict="unknown"' in page
    assert "the final drain did not complete" in page


def test_cli_report_writes_page_junit_and_store_index(invalid_run, capsys):
    assert main(["report", str(invalid_run)]) == 0
    assert (invalid_run / "report.html").exists() and (invalid_run / "junit.xml").exists()
    assert (invalid_run.parent.parent / "index.html").exists()


def test_cli_report_on_a_non_run_is_a_one_line_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "test.json" in error


def test_report_outside_a_store_does_not_index_the_parent(tmp_path, capsys):
    run = make_run(tmp_path / "loose")
    shutil.rmtree(tmp_path / "store", ignore_errors=True)
    assert main(["report", str(run)]) == 0
    assert not (tmp_path.parent / "index.html").exists()
    assert "not inside a store" in capsys.readouterr().out


def test_malformed_fields_degrade_instead_of_crashing(tmp_path):
    run = make_run(tmp_path / "r", minimal_results=True)
    (run / "results.json").write_text(
        json.dumps(
            {
                "verdict": "invalid",
                "anomalies": {
                    "lost-write": 3,
                    "duplicate": {"count": "many", "allowed": True, "examples": "none"},
                    "aborted-read": {"count": 1, "examples": [1, "x", {"key": None, "ops": ["a", 5]}, {"ops": 9}]},
                },
                "stats": {
                    "timeseries": {"rows": [1, {"t": "x"}, {"t": 0, "f": "send", "type": "ok", "count": None}]},
                    "lag": {"rows": 7},
                    "latency": 3,
                    "by_f": {"send": 2},
                },
                "config": [],
                "checker": "x",
                "nemesis": [1, {"start_s": "a"}, {"f": "kill", "start_s": 1.0, "stop_s": None}],
                "partitions": {"1": 5, "2": {"offsets": [None, {"offset": 1}]}},
                "elle": "no",
            }
        )
    )
    page = page_of(run)
    assert 'data-verdict="invalid"' in page and 'id="anomaly-aborted-read"' in page
    assert "never healed" in page
    (run / "results.json").write_text(json.dumps({"verdict": 3, "anomalies": [], "stats": "x", "nemesis": {}}))
    assert 'data-verdict="unknown"' in page_of(run)


def test_unknown_verdict_uses_the_checkers_own_reasons(tmp_path):
    run = make_run(tmp_path / "r", verdict="unknown")
    results = json.loads((run / "results.json").read_text())
    results["verdict_reasons"] = ["history cut short at event 1200"]
    (run / "results.json").write_text(json.dumps(results))
    assert "not conclusive: history cut short at event 1200" in page_of(run)


def test_bad_examples_are_marked_on_time_charts_at_their_time(tmp_path):
    run = make_run(tmp_path / "r")
    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["lost-write"]["examples"][0]["time_s"] = 6.5
    (run / "results.json").write_text(json.dumps(results))
    page = page_of(run)
    assert page.count("lost-write (key") >= 6 and " at 6.50s</title>" in page


def test_nodes_written_by_gregor_run_show_as_names_and_addresses(tmp_path):
    run_dir = make_run(tmp_path / "run")
    test = json.loads((run_dir / "test.json").read_text())
    test["nodes"] = [{"name": f"n{i}", "ip": f"10.1.2.{10 + i}", "broker_id": i} for i in (1, 2, 3)]
    (run_dir / "test.json").write_text(json.dumps(test))
    page = page_of(run_dir)
    assert "3 (n1 10.1.2.11, n2 10.1.2.12, n3 10.1.2.13)" in page
    assert "broker_id" not in page


def test_a_skipped_cycle_search_is_a_note_not_an_anomaly(tmp_path):
    run = make_run(tmp_path / "r", verdict="valid")
    results = json.loads((run / "results.json").read_text())
    skipped = "G0-realtime/G1c-ww-realtime not checked: 683533 edges remain after trimming"
    results["anomalies"]["permitted-cycle-search-incomplete"] = {
        "count": 1,
        "allowed": True,
        "why_allowed": "not an anomaly",
        "examples": [{"ops": [], "cycle": skipped}],
    }
    (run / "results.json").write_text(json.dumps(results))
    page = page_of(run)
    assert 'id="anomaly-permitted-cycle-search-incomplete"' not in page
    assert "permitted-cycle-search-incomplete (1)" not in page  # not in the banner's listing
    note = page[page.index('id="not-checked"') :]
    assert html.escape(skipped, quote=True) in note[: note.index("</div>")]


def test_keys_the_drain_found_truncated_are_shown_as_evidence(tmp_path):
    run = make_run(tmp_path / "r")
    test = json.loads((run / "test.json").read_text())
    test["drain"]["truncated"] = {"2": {"end_offset": 40, "acked_offset": 45, "waited_s": 8.0}}
    (run / "test.json").write_text(json.dumps(test))
    page = page_of(run)
    assert 'id="truncation"' in page and "ends at offset 40, but a client had seen offset 45 (6 offset(s) gone)" in page
    assert SCRIPT not in page  # the key's topic name is hostile
    assert 'id="truncation"' not in page_of(make_run(tmp_path / "plain"))
