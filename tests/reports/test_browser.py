"""The report in a real headless Chromium: renders, plots drawn, planted scripts not run.

Screenshots go to artifacts/ (gitignored) as the run's visual artifact.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

pytest.importorskip("selenium")

from conftest import SCRIPT, add_evidence, make_run  # noqa: E402

from reports.browser import full_page_png, headless_chromium  # noqa: E402
from reports.index import write_index  # noqa: E402
from reports.junit import write_junit  # noqa: E402
from reports.render import write_report  # noqa: E402

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
ANOMALIES = ("lost-write", "aborted-read", "duplicate")


@pytest.fixture(scope="module")
def browser():
    with headless_chromium(1400, 1000) as driver:
        yield driver


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("browser") / "store"
    invalid = make_run(store / "kafka-send-kill" / "20261122T010000")
    add_evidence(invalid)
    valid = make_run(store / "kafka-send-calm" / "20261122T020000", verdict="valid", name="kafka-send-calm")
    for run in (invalid, valid):
        write_report(run)
        write_junit(run)
    write_index(store)
    return store


def severe(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def assert_rendered_and_inert(driver):
    assert severe(driver) == []
    assert driver.execute_script("return window.__pwned") is None
    assert "PWNED" not in driver.title
    banner = driver.find_element("id", "verdict")
    assert banner.get_attribute("data-verdict") == "invalid"
    assert "INVALID" in banner.text and "lost-write (3)" in banner.text
    assert banner.size["height"] > 60 and banner.value_of_css_property("background-color") == "rgba(192, 23, 43, 1)"
    for name in ANOMALIES:
        section = driver.find_element("id", f"anomaly-{name}")
        assert name in section.text and section.size["height"] > 0
    # the planted script is visible as text, in the value column and the topic name
    assert SCRIPT in driver.find_element("id", "anomaly-aborted-read").text
    assert driver.execute_script("return document.querySelectorAll('script').length") == 0
    assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    for kind, least in (("chart", 6), ("plog", 3), ("timeline", 3)):
        svgs = driver.find_elements("css selector", f"svg.{kind}")
        assert len(svgs) >= least
        for picture in svgs:
            box = driver.execute_script(
                "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height]", picture
            )
            assert box[0] > 100 and box[1] > 20
    # data actually drawn: polylines with points, shaded fault windows, coloured cells
    assert driver.execute_script("return document.querySelectorAll('svg.chart polyline').length") >= 8
    assert driver.execute_script("return document.querySelectorAll('svg.chart rect.fault').length") == 12
    assert driver.execute_script("return document.querySelectorAll('svg.plog rect.status-lost').length") == 1
    # the brokers' batches beside the aborted-read: the planted value shown as text, the two rows highlighted
    batches = driver.find_element("css selector", "#anomaly-aborted-read table.batches")
    assert SCRIPT in batches.text and "ABORT" in batches.text
    holding = batches.find_element("css selector", "tr.holds td")
    assert holding.value_of_css_property("background-color") == "rgba(255, 241, 168, 1)"
    ending = batches.find_element("css selector", "tr.ends td")
    assert ending.value_of_css_property("background-color") == "rgba(214, 233, 255, 1)"


def test_report_from_disk_renders_and_runs_no_planted_script(browser, store):
    ARTIFACTS.mkdir(exist_ok=True)
    page = store / "kafka-send-kill" / "20261122T010000" / "report.html"
    browser.get(page.as_uri())
    assert_rendered_and_inert(browser)
    browser.save_screenshot(str(ARTIFACTS / "report-invalid-top.png"))
    full_page_png(browser, ARTIFACTS / "report-invalid-full.png")


def test_report_from_a_static_server_renders_the_same(browser, store):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(store)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        browser.get(f"{base}/kafka-send-kill/20261122T010000/report.html")
        assert_rendered_and_inert(browser)
        browser.get(f"{base}/index.html")
        assert severe(browser) == []
        links = [a.get_attribute("href") for a in browser.find_elements("css selector", "tr.run a")]
        assert links == [
            f"{base}/kafka-send-calm/20261122T020000/report.html",
            f"{base}/kafka-send-kill/20261122T010000/report.html",
        ]
        browser.find_elements("css selector", "tr.run a")[1].click()
        assert browser.find_element("id", "verdict").get_attribute("data-verdict") == "invalid"
    finally:
        server.shutdown()
        server.server_close()


def test_valid_report_and_index_screenshots(browser, store):
    ARTIFACTS.mkdir(exist_ok=True)
    browser.get((store / "kafka-send-calm" / "20261122T020000" / "report.html").as_uri())
    banner = browser.find_element("id", "verdict")
    assert banner.get_attribute("data-verdict") == "valid" and "VALID" in banner.text
    assert banner.value_of_css_property("background-color") == "rgba(30, 126, 52, 1)"
    assert severe(browser) == []
    browser.save_screenshot(str(ARTIFACTS / "report-valid-top.png"))
    browser.get((store / "index.html").as_uri())
    assert severe(browser) == []
    assert [v.text for v in browser.find_elements("css selector", "td.verdict")] == ["valid", "invalid"]
    browser.save_screenshot(str(ARTIFACTS / "index.png"))
