"""The catalogue page: one row per claim, detection and clean rates, a safe
side with bad anomalies shown as a red finding, links to each run's report,
untrusted text escaped; and the same page in a real headless Chromium."""

from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.controller import catalogue
from harness.controller.scenarios import describe_run
from harness.controller.scenarios_page import render, write_page

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def run(detected=True, clean=True, first_s=12.0, anomalies=None, number=1, error=None):
    if error:
        return {"error": error, "log": f"logs/x-{number}.log", "seed": number}
    return {
        "error": None,
        "seed": number,
        "verdict": "valid" if clean else "invalid",
        "detected": detected,
        "clean": clean,
        "first_s": first_s,
        "anomalies": anomalies or {},
        "report": f"runs/x/2026112{number}T000000/report.html",
    }


def claim(name, unsafe_runs, safe_runs, note="<b>bold</b> note"):
    entry = {
        "name": name,
        "promise": f"the promise of {name} <script>alert(1)</script>",
        "note": note,
        "expected": ["lost-write"],
        "lab": {"replica.lag.time.max.ms": "4000"},
        "storage": "disk",
        "sides": {
            "unsafe": {"settings": "acks=1", "arguments": ["--acks", "1"], "runs": unsafe_runs},
            "safe": {"settings": "acks=all", "arguments": ["--acks", "all"], "runs": safe_runs},
        },
    }
    entry["figures"] = {side: catalogue.side_figures(entry["sides"][side]["runs"], side) for side in catalogue.SIDES}
    return entry


LOST = {"lost-write": {"count": 3, "allowed": True, "why_allowed": "acks=1"}}
BAD = {"lost-write": {"count": 1, "allowed": False, "why_allowed": None}}


def summary():
    return {
        "started": "2026-11-23T00:00:00Z",
        "runs_per_side": 2,
        "seed": 1,
        "time_limit_s": 60,
        "backend": "local",
        "system": "kafka",
        "version": "3.9.1",
        "finished": True,
        "command": "gregor scenarios --runs 2",
        "claims": [
            claim("kept", [run(anomalies=LOST), run(detected=False, first_s=None, number=2)], [run(), run(number=2)]),
            claim(
                "broken",
                [run(anomalies=LOST), run(error="gregor run exited 2", number=2)],
                [run(clean=False, first_s=41.0, anomalies=BAD), run(number=2)],
            ),
        ],
    }


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.classes, self.links, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td":
            self.classes.append(attrs.get("class", ""))
        if tag == "a":
            self.links.append(attrs.get("href"))
        if tag == "script":
            self.scripts += 1


def test_rows_rates_findings_and_links():
    page = render(summary())
    cells = Cells()
    cells.feed(page)
    assert cells.classes == [
        "claim",
        "client",
        "side shown",
        "side clean",
        "claim",
        "client",
        "side shown",
        "side finding",
    ]
    assert page.count('<td class="client">librdkafka</td>') == 2  # written before the Java client: librdkafka
    assert "detected in 1/2 runs" in page and "no bad anomaly in 2/2 runs" in page
    assert "detected in 1/1 run (1 failed)" in page and "no bad anomaly in 1/2 runs" in page
    assert "Red findings: the safe side of broken showed bad anomalies" in page
    assert "median time to the first bad anomaly: 41.0 s" in page
    assert "runs/x/20261121T000000/report.html" in cells.links and "logs/x-2.log" in cells.links
    assert cells.scripts == 0 and "&lt;script&gt;" in page and "&lt;b&gt;bold" in page


def test_the_client_column_names_the_catalogues_client_and_a_claims_own():
    pinned = claim("pinned", [run()], [run()])
    pinned["sides"]["safe"]["client"] = "librdkafka"  # the claim pins its safe side's client
    page = render(
        {**summary(), "client": "java", "client_version": "4.4.0", "claims": [claim("a", [run()], [run()]), pinned]}
    )
    assert '<td class="client">java 4.4.0</td>' in page
    assert '<td class="client">unsafe: java, safe: librdkafka</td>' in page


def test_a_claim_not_run_yet_says_so():
    pending = {**summary(), "finished": False, "claims": [claim("later", [], [])]}
    page = render(pending)
    assert page.count("not run yet") == 2 and "in progress" in page


def test_a_truncated_log_is_shown_even_when_no_anomaly_counts_it():
    gone = {**run(detected=False, first_s=None), "truncated": ["0", "3"]}
    page = render({**summary(), "claims": [claim("power", [gone, run(anomalies=LOST, number=2)], [run()])]})
    assert "logs truncated below acknowledged offsets in 1/2 runs" in page
    assert "run 1: not detected, log truncated" in page and "run 2: detected<" in page
    assert render(summary()).count("truncated below") == 0
    line = describe_run({"error": None, "anomalies": {}, "detected": False, "truncated": ["0", "3"]}, "unsafe")
    assert (
        line == "NOT detected (no anomaly); the drain found the log of keys 0, 3 truncated below acknowledged offsets"
    )


@pytest.mark.browser
def test_the_page_in_a_real_browser(tmp_path):
    pytest.importorskip("selenium")
    from reports.browser import full_page_png, headless_chromium

    path = write_page(tmp_path, summary())
    with headless_chromium(1400, 900) as driver:
        driver.get(path.as_uri())
        rows = driver.find_elements("css selector", "table.claims tbody tr")
        assert len(rows) == 2
        finding = driver.find_element("css selector", "td.side.finding")
        assert "192, 23, 43" in finding.value_of_css_property("border-top-color")
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        ARTIFACTS.mkdir(exist_ok=True)
        full_page_png(driver, ARTIFACTS / "scenarios-page.png")
