"""agent/logging.py imports structlog without its console helpers (rich's traceback and pretty-printer, pygments)
when stderr is not a terminal, and with them on a terminal; logging works either way. Fresh interpreters: which
modules a process loaded is decided by its first import of structlog."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

# Imports rich first (as `dagent` does for its console), then logs a line and an exception; prints what loaded.
PROBE = """
import json, sys
import rich.console
rich_before = sys.modules["rich"]
from durable_agent.agent.logging import configure_logging, get_logger, structlog
configure_logging("INFO")
log = get_logger("probe")
log.info("hello", answer=42)
try:
    1 / 0
except ZeroDivisionError:
    log.exception("failed")
loaded = {name: name in sys.modules for name in ("structlog", "rich.traceback", "rich.pretty", "pygments")}
print(json.dumps({"loaded": loaded, "rich_kept": sys.modules["rich"] is rich_before,
                  "renderer_uses_rich": structlog.dev.rich is not None}))
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DAGENT_"))}


def test_without_a_terminal_structlog_loads_no_console_helpers_and_writes_json() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], env=_env(), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"loaded": {"structlog": True, "rich.traceback": False, "rich.pretty": False, "pygments": False},
                      "rich_kept": True, "renderer_uses_rich": False}
    hello, failed = (json.loads(line) for line in done.stderr.splitlines())
    assert hello["event"] == "hello" and hello["answer"] == 42 and hello["level"] == "info"
    assert failed["event"] == "failed" and failed["level"] == "error"


def test_on_a_terminal_the_console_renderer_keeps_rich_tracebacks() -> None:
    terminal, stderr = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], env={**_env(), "TERM": "dumb"}, stdout=subprocess.PIPE,
                              stderr=stderr, text=True, timeout=60, stdin=subprocess.DEVNULL)
        os.close(stderr)
        written = b""
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            written += chunk
    finally:
        os.close(terminal)
    assert done.returncode == 0, written.decode(errors="replace")
    report = json.loads(done.stdout)
    assert report["loaded"] == {"structlog": True, "rich.traceback": True, "rich.pretty": True, "pygments": True}
    assert report["rich_kept"] and report["renderer_uses_rich"]
    text = written.decode(errors="replace")
    assert "hello" in text and "answer=42" in text and "ZeroDivisionError" in text
