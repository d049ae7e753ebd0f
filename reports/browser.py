"""A real headless Chromium (Debian's chromium + chromedriver via selenium).

Used by the report tests and the benchmark to open pages the way a person
would. selenium is in the `test` extra only, hence the lazy import; the
flags keep Chromium off the network and able to run as root.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager

from ground.errors import GregorError

CHROMIUM = os.environ.get("GREGOR_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GREGOR_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


@contextmanager
def headless_chromium(width: int = 1400, height: int = 1000):
    """Yields a selenium WebDriver with browser console logging on; always quits it."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise GregorError("selenium is not installed; run `.venv/bin/pip install -e .[test]`") from error
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            raise GregorError(f"{path} not found; install Debian's chromium and chromium-driver (./setup does)")
    profile = tempfile.mkdtemp(prefix="gregor-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + (f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def full_page_png(driver, path) -> None:
    """A screenshot of the whole page, not just the window (Chrome DevTools)."""
    import base64

    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    with open(path, "wb") as out:
        out.write(base64.b64decode(shot["data"]))
