"""Headless Chromium from Debian's packages, driven by Selenium through Debian's chromedriver.

Both paths are given explicitly, so selenium-manager never looks for (or downloads) a driver or browser.
Selenium is blocking: tests call these helpers through `asyncio.to_thread` so the event loop keeps serving
the API under test.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_SECONDS = 60  # an upper bound for the page to catch up, not a timing assertion
SHOTS = os.environ.get("DAGENT_PAGE_SHOTS")  # a folder: tests save screenshots of what they checked there

T = TypeVar("T")


@contextmanager
def browser(width: int = 1300, height: int = 1000, *, offline: bool = False) -> Iterator[WebDriver]:
    """`offline`: the network is off but for this machine: every host name but localhost and 127.0.0.1 fails
    to resolve (a CDN, any other site)."""
    os.environ.setdefault("SE_OFFLINE", "true")
    options = Options()
    options.binary_location = CHROMIUM
    if offline:
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="dagent-chromium-") as profile:
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", f"--window-size={width},{height}", f"--user-data-dir={profile}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        if width < 500:  # Chromium's windows are at least 500 px wide: emulate a phone's viewport instead
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
        try:
            yield driver
        finally:
            driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], T], what: str) -> T:
    """Poll `condition` until it returns something truthy; on timeout fail with `what` and the page text.
    Pages re-render live, so conditions should return what they read (text), not elements."""
    try:
        return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except Exception as exc:
        body = driver.find_element("tag name", "body").text
        raise AssertionError(f"page never showed {what}; it shows:\n{body}") from exc


def texts(driver: WebDriver, css: str) -> list[str]:
    """The visible text of every element matching `css`, read at once (pages re-render)."""
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].filter(e => e.offsetParent !== null)"
        ".map(e => e.innerText)", css))


def attributes(driver: WebDriver, css: str, name: str) -> list[str | None]:
    """The attribute `name` of every element matching `css`, read at once."""
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]))", css, name))


def wait_for_text(driver: WebDriver, css: str, pattern: str, what: str) -> str:
    """The text of the first element matching `css` whose text matches the regex `pattern`."""
    regex = re.compile(pattern, re.S)
    return wait_for(driver, lambda d: next((t for t in texts(d, css) if regex.search(t)), None), what)


def horizontal_overflow(driver: WebDriver) -> int:
    """How many CSS pixels the page is wider than the viewport (0: no horizontal scroll)."""
    return int(driver.execute_script(
        "return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - window.innerWidth"))


def screenshot(driver: WebDriver, name: str) -> None:
    """Save a screenshot when DAGENT_PAGE_SHOTS names a folder (to look at what a test saw)."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def console_errors(driver: WebDriver) -> list[str]:
    """The page's console errors since the last call (e.g. a script refused by the Content-Security-Policy)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
