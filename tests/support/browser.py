"""Headless Chromium (Debian's `chromium` + `chromium-driver`) driven over the W3C WebDriver protocol.

Plain HTTP to `chromedriver`, no client library: open a page, wait until some text is on it (the Temporal
UI keeps long-polling, so "page loaded" never settles), click by visible text, read the DOM, screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from durable_agent.cli.devserver import free_port

CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000"]


def browser_available() -> bool:
    return shutil.which("chromedriver") is not None and shutil.which("chromium") is not None


class Browser:
    def __init__(self) -> None:
        self.port = free_port()
        self._profile = tempfile.mkdtemp(prefix="dagent-chromium-")
        self._driver = subprocess.Popen(["chromedriver", f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        capabilities = {"browserName": "chrome", "goog:chromeOptions": {
            "binary": shutil.which("chromium"), "args": [*CHROMIUM_ARGS, f"--user-data-dir={self._profile}"]}}
        session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        self.session = session["sessionId"]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["value"]

    def _session(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def html(self) -> str:
        return str(self._session("GET", "/source"))

    def wait_for_text(self, text: str, timeout: float = 60.0) -> str:
        """The page's HTML once `text` is in it (fails after `timeout`: a guard, not a measurement)."""
        deadline = time.monotonic() + timeout
        while True:
            html = self.html()
            if text in html:
                return html
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on the page")
            time.sleep(0.25)

    def frames_html(self) -> list[str]:
        """The HTML inside each iframe of the page (the Temporal UI renders Markdown in sandboxed frames)."""
        frames = self._session("POST", "/elements", {"using": "css selector", "value": "iframe"})
        found = []
        for frame in frames:
            self._session("POST", "/frame", {"id": frame})
            found.append(self.html())
            self._session("POST", "/frame/parent")
        return found

    def wait_for_frame_text(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for html in self.frames_html():
                if text in html:
                    return html
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared in a frame of the page")
            time.sleep(0.25)

    def click_text(self, text: str) -> None:
        """Click the first button, link or option whose visible text is `text`."""
        xpath = (f"//*[self::button or self::a or self::li or self::span or self::div][normalize-space(.)="
                 f"{json.dumps(text)}]")
        found = self._session("POST", "/element", {"using": "xpath", "value": xpath})
        element = next(iter(found.values()))
        self._session("POST", f"/element/{element}/click")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))

    def close(self) -> None:
        try:
            self._session("DELETE", "")
        except OSError:
            pass
        self._driver.terminate()
        self._driver.wait(timeout=15)
        shutil.rmtree(self._profile, ignore_errors=True)
