"""Headless Chromium from Debian's packages, driven by Selenium through Debian's chromedriver.

Both paths are given explicitly, so selenium-manager never looks for (or downloads) a driver or browser.
Selenium is blocking: tests call these helpers through `asyncio.to_thread` so the event loop keeps serving
the API under test.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

T = TypeVar("T")


@contextmanager
def browser() -> Iterator[WebDriver]:
    os.environ.setdefault("SE_OFFLINE", "true")
    options = Options()
    options.binary_location = CHROMIUM
    with tempfile.TemporaryDirectory(prefix="dagent-chromium-") as profile:
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", "--window-size=1300,1000", f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
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
