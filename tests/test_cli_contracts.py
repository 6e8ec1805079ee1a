"""The CLI's output contract: a user error is one line on stderr with a non-zero exit code, for every
command; `--json` is exactly one JSON document on stdout (tested with a server in test_cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

DAGENT = [sys.executable, "-m", "cli"]
OFFLINE = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1", "DAGENT_LOG_LEVEL": "WARNING"}  # nothing listens

USER_ERRORS = {
    "run without text": ["run"],
    "run with an over-long input": ["run", "x" * 100_001],
    "run with an unknown tier": ["run", "hi", "--model", "huge"],
    "show without id": ["show"],
    "show, server unreachable": ["show", "prompt-1", "--json"],
    "watch with a bad offset": ["watch", "prompt-1", "--from", "soon"],
    "approve with --input not JSON": ["approve", "p", "c", "--input", "{amount: 90}"],
    "approve with --input not an object": ["approve", "p", "c", "--input", "[1]"],
    "reject without call id": ["reject", "prompt-1"],
    "pending, server unreachable": ["pending"],
    "stuck, server unreachable": ["stuck"],
    "cancel without id": ["cancel"],
    "chat with an unknown option": ["chat", "--nope"],
    "worker with a bad model spec": ["worker", "--model-normal", "no-such-provider:x"],
    "server with a bad port": ["server", "--port", "http"],
    "demo with an unknown option": ["demo", "--fast"],
    "an unknown command": ["nosuch"],
}


@pytest.mark.parametrize("args", USER_ERRORS.values(), ids=USER_ERRORS.keys())
def test_a_user_error_is_one_line_on_stderr_with_a_non_zero_exit(args: list[str]) -> None:
    done = subprocess.run([*DAGENT, *args], env=OFFLINE, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error: ", "refused: ")), done.stderr
