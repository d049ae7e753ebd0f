"""The brokers' batches beside each lost-write, aborted-read and duplicate instance
(reports/evidence.py), from a hand-written evidence/segments.json."""

from __future__ import annotations

import html
import json

from conftest import HOSTILE_ERROR, HOSTILE_TOPIC, SCRIPT, add_evidence, make_run

from reports.render import write_report


def section_of(page: str, name: str) -> str:
    start = page.index(f'id="anomaly-{name}"')
    return page[start : page.index("</section>", start)]


def test_the_batch_holding_the_offset_and_the_marker_ending_it_are_highlighted(invalid_run):
    add_evidence(invalid_run)
    page = write_report(invalid_run).read_text(encoding="utf-8")
    section = section_of(page, "aborted-read")
    assert 'class="evidence-row"' in section
    holds = section[section.index('<tr class="holds">') :]
    holds = holds[: holds.index("</tr>")]
    assert "98&ndash;99 (holds the offset)" in holds
    cells = [c.split(">", 1)[1] for c in holds.split("<td")[1:]]
    assert cells[2:6] == ["7</td>", "2</td>", "10&ndash;11</td>", "yes</td>"]
    ends = section[section.index('<tr class="ends">') :]
    ends = ends[: ends.index("</tr>")]
    assert "100 (ended its transaction)" in ends and ">ABORT<" in ends
    # a batch of another producer within the shown radius is listed, but not highlighted
    assert '<tr class=""><td>n1</td><td class="num">90</td>' not in section  # 90 is outside 99 +/- 5
    assert "n2: no batch holds offset 99 (its log: log start 0, end 90, 30 batch(es))" in section
    assert f"n3: the dump failed ({html.escape(HOSTILE_ERROR, quote=True)})" in section


def test_record_values_topic_and_errors_from_the_brokers_are_escaped(invalid_run):
    add_evidence(invalid_run)
    page = write_report(invalid_run).read_text(encoding="utf-8")
    section = section_of(page, "aborted-read")
    evidence = section[section.index('class="evidence-row"') :]
    assert html.escape(SCRIPT, quote=True) in evidence
    assert html.escape(HOSTILE_TOPIC, quote=True) in evidence
    assert SCRIPT not in page and HOSTILE_ERROR not in page


def test_an_instance_on_a_partition_the_dump_did_not_cover_says_so(invalid_run):
    add_evidence(invalid_run)
    section = section_of(write_report(invalid_run).read_text(encoding="utf-8"), "lost-write")
    assert "n1: holds no replica of t0-" in section and "n3: the dump failed" in section
    assert '<tr class="holds">' not in section


def test_a_run_without_evidence_says_so_and_still_renders(invalid_run):
    page = write_report(invalid_run).read_text(encoding="utf-8")
    for name in ("lost-write", "aborted-read", "duplicate"):
        assert "No broker evidence: this run has no evidence/segments.json" in section_of(page, name)
    assert 'class="evidence-row"' not in page


def test_a_system_without_segments_and_a_failed_collection_are_one_line(tmp_path):
    run = make_run(tmp_path / "store" / "t" / "20261122T010000")
    path = run / "evidence" / "segments.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"system": "tansu", "note": f"no segment dump for tansu: {SCRIPT}"}))
    page = write_report(run).read_text(encoding="utf-8")
    assert f"No broker evidence: no segment dump for tansu: {html.escape(SCRIPT, quote=True)}" in page
    path.write_text(json.dumps({"system": "kafka", "error": "n1: DumpLogSegments failed: boom"}))
    page = write_report(run).read_text(encoding="utf-8")
    assert "The brokers' segments could not be read: n1: DumpLogSegments failed: boom" in page
    path.write_text("{not json")
    page = write_report(run).read_text(encoding="utf-8")
    assert "segments.json could not be read" in page


def test_replicas_that_agree_share_a_row_and_a_divergent_one_stands_out(invalid_run):
    path = add_evidence(invalid_run)
    found = json.loads(path.read_text())
    nodes = found["nodes"]
    (where,) = nodes["n1"]["replicas"]
    nodes["n2"]["replicas"][where] = json.loads(json.dumps(nodes["n1"]["replicas"][where]))
    nodes["n2"]["replicas"][where]["batches"][2]["marker"] = "COMMIT"  # n2's marker differs
    path.write_text(json.dumps(found))
    section = section_of(write_report(invalid_run).read_text(encoding="utf-8"), "aborted-read")
    assert '<tr class="holds"><td>n1, n2</td>' in section
    assert section.count('<tr class="holds">') == 1
    assert '<tr class="ends"><td>n1</td>' in section and '<tr class="ends"><td>n2</td>' in section
    assert ">ABORT<" in section and ">COMMIT<" in section


def test_instances_at_the_same_offset_share_one_table(invalid_run):
    add_evidence(invalid_run)
    results = json.loads((invalid_run / "results.json").read_text())
    examples = results["anomalies"]["aborted-read"]["examples"]
    examples.append(dict(examples[0], ops=list(reversed(examples[0]["ops"]))))  # a second reader of offset 99
    (invalid_run / "results.json").write_text(json.dumps(results))
    section = section_of(write_report(invalid_run).read_text(encoding="utf-8"), "aborted-read")
    assert section.count('<table class="batches">') == 1
    assert "The brokers' batches: as for instance 1." in section


def add_eos_duplicate(run, known_findings=None, consumer_config=None):
    """An eos-duplicate instance in results.json, the run's consumer settings in test.json,
    and evidence/segments.json naming it or not."""
    test = json.loads((run / "test.json").read_text())
    test["client"]["consumer_config"] = consumer_config or {}
    (run / "test.json").write_text(json.dumps(test))
    path = run / "results.json"
    results = json.loads(path.read_text())
    results["anomalies"]["eos-duplicate"] = {
        "count": 1,
        "allowed": False,
        "why_allowed": None,
        "description": "an input copied twice",
        "examples": [{"key": 0, "value": 4, "offset": 3, "values": [40, 44], "ops": [1, 3]}],
    }
    path.write_text(json.dumps(results))
    evidence = run / "evidence" / "segments.json"
    evidence.parent.mkdir(exist_ok=True)
    evidence.write_text(json.dumps({"system": "kafka", "known_findings": known_findings or []}))


def test_an_input_copied_twice_names_the_copiers_stale_fetch_from_its_own_log(invalid_run):
    shown = {
        "finding": "librdkafka-stale-fetch-redelivery",
        "report": "docs/findings/librdkafka-stale-fetch-redelivery.md",
        "anomaly": "eos-duplicate",
        "key": 0,
        "value": 4,
        "offset": 3,
        "process": 5,
        "log": "clients/client-1.log",
        "fetched_from": 0,
        "line": f"Partition t0 [0] start fetching at offset 0 {SCRIPT}",
    }
    add_eos_duplicate(invalid_run, [shown], {"debug": "cgrp,consumer,topic,fetch"})
    section = section_of(write_report(invalid_run).read_text(encoding="utf-8"), "eos-duplicate")
    row = section[section.index('class="evidence-row"') :]
    assert "The copier's own librdkafka log shows this to be the reproduced finding" in row
    assert "process 5, which copied this input again, fetched its partition from offset 0" in row
    assert html.escape(SCRIPT, quote=True) in row and SCRIPT not in section
    assert "--consumer-config" not in section  # the run could show it, and did


def test_an_input_copied_twice_without_the_copiers_fetch_log_says_how_to_see_the_cause(invalid_run):
    add_eos_duplicate(invalid_run)
    section = section_of(write_report(invalid_run).read_text(encoding="utf-8"), "eos-duplicate")
    assert 'class="evidence-row"' not in section
    assert "<code>--consumer-config debug=cgrp,consumer,topic,fetch</code>" in section
