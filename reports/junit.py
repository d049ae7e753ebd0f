"""junit.xml beside the report, so CI systems list each anomaly type as a test case.

One test case for the verdict, and one per anomaly name: a failure for a
bad anomaly, skipped (with why) for a permitted one, passing for every known
name the checker did not find.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

from ground.atomic import write_atomic
from reports.explain import explain, known_names
from reports.render import verdict_reason
from reports.stored_run import load_run


def junit_tree(run) -> ET.ElementTree:
    """The JUnit XML for one loaded run (ElementTree escapes all text)."""
    name = str(run.test.get("name") or run.directory.name)
    suite = ET.Element("testsuite", name=f"gregor.{name}")
    failures = skipped = 0
    verdict_case = ET.SubElement(suite, "testcase", classname=f"gregor.{name}", name="verdict")
    reason = verdict_reason(run)
    if not run.results:
        ET.SubElement(verdict_case, "skipped", message=reason)
        skipped += 1
    elif run.verdict == "invalid":
        ET.SubElement(verdict_case, "failure", message=reason, type="invalid").text = reason
        failures += 1
    elif run.verdict == "unknown":
        ET.SubElement(verdict_case, "skipped", message=reason)
        skipped += 1
    else:
        ET.SubElement(verdict_case, "system-out").text = reason
    names = list(run.anomalies) + [n for n in known_names() if n not in run.anomalies]
    for anomaly_name in names:
        anomaly = run.anomalies.get(anomaly_name)
        case = ET.SubElement(suite, "testcase", classname=f"gregor.{name}.anomalies", name=str(anomaly_name))
        if anomaly is None:
            if not run.results:
                ET.SubElement(case, "skipped", message="not checked")
                skipped += 1
            continue
        anomaly = anomaly if isinstance(anomaly, dict) else {}
        count = anomaly.get("count", "?")
        if anomaly.get("allowed"):
            ET.SubElement(case, "skipped", message=f"{count} found, permitted: {anomaly.get('why_allowed')}")
            skipped += 1
        else:
            message = f"{count} found: {explain(str(anomaly_name))}"
            failure = ET.SubElement(case, "failure", message=message, type="bad-anomaly")
            failure.text = "\n".join(str(e) for e in (anomaly.get("examples") or [])[:5])
            failures += 1
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    return ET.ElementTree(suite)


def write_junit(run_dir) -> Path:
    """Writes run_dir/junit.xml and returns its path."""
    run = load_run(run_dir)
    path = run.directory / "junit.xml"
    data = io.BytesIO()
    junit_tree(run).write(data, encoding="utf-8", xml_declaration=True)
    write_atomic(path, data.getvalue())
    return path
