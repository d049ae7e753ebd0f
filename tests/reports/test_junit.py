"""junit.xml: one test case per anomaly name plus the verdict."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from conftest import make_run

from reports.explain import known_names
from reports.junit import write_junit


def cases(path):
    suite = ET.parse(path).getroot()
    return suite, {case.get("name"): case for case in suite.iter("testcase")}


def test_bad_anomalies_fail_permitted_are_skipped_and_absent_pass(invalid_run):
    suite, by_name = cases(write_junit(invalid_run))
    assert by_name["verdict"].find("failure") is not None
    assert "lost-write (3)" in by_name["verdict"].find("failure").get("message")
    for name in ("lost-write", "aborted-read"):
        assert by_name[name].find("failure") is not None
    assert "enable.idempotence=false" in by_name["duplicate"].find("skipped").get("message")
    for name in set(known_names()) - {"lost-write", "aborted-read", "duplicate"}:
        assert list(by_name[name]) == []  # passing
    assert suite.get("failures") == "3" and suite.get("skipped") == "1"
    assert int(suite.get("tests")) == len(by_name) == 1 + len(known_names())


def test_a_valid_run_has_a_passing_verdict(tmp_path):
    run = make_run(tmp_path / "r", verdict="valid")
    _, by_name = cases(write_junit(run))
    assert by_name["verdict"].find("failure") is None and by_name["verdict"].find("skipped") is None
    assert by_name["duplicate"].find("skipped") is not None


def test_unknown_anomaly_names_get_their_own_case(tmp_path):
    run = make_run(tmp_path / "r", minimal_results=True)
    import json

    results = json.loads((run / "results.json").read_text())
    results["anomalies"]["brand-new-<anomaly>"] = {"count": 1, "allowed": False, "examples": []}
    (run / "results.json").write_text(json.dumps(results))
    _, by_name = cases(write_junit(run))
    assert by_name["brand-new-<anomaly>"].find("failure") is not None
