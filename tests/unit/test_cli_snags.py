"""Two `dagent` snags of issue 40: a refusal says its cause once, and `dagent server` restarts on its port at once
after a crash (its pre-check binds as the server does, with SO_REUSEADDR)."""

from __future__ import annotations

import socket
import subprocess
import sys

from durable_agent.agent.errors import DecisionRefused
from durable_agent.cli.errors import one_line


def test_a_refusal_says_its_cause_once() -> None:
    cause = "bob may not decide this call; approvers: role:finance"
    try:
        try:
            try:
                raise DecisionRefused(cause)
            except DecisionRefused as inner:
                raise DecisionRefused(cause) from inner
        except DecisionRefused as middle:
            raise RuntimeError(f"decision on 'call_r2_0' refused: {cause}") from middle
    except RuntimeError as outer:
        line = one_line(outer)
    assert line.count(cause) == 1, line
    try:
        try:
            raise ModuleNotFoundError("No module named 'teamplugins'")
        except ModuleNotFoundError as missing:
            raise ValueError("cannot load plugin 'teamplugins.finance:plugin'") from missing
    except ValueError as different:
        assert "(caused by ModuleNotFoundError: No module named 'teamplugins')" in one_line(different)


def _check_port(port: int) -> subprocess.CompletedProcess[str]:
    code = ("from durable_agent.cli.common import require_free_port\n"
            f"require_free_port('127.0.0.1', {port}, '--port')\nprint('free')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)


def test_a_port_left_in_time_wait_by_a_killed_server_is_free_and_a_listening_one_is_not() -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the Temporal server (Go) listens
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    busy = _check_port(port)
    accepted.close()  # the server's side closes first: its port stays in TIME_WAIT, as after a SIGKILL
    client.close()
    server.close()
    assert busy.returncode != 0 and "cannot listen on" in busy.stderr and "--port" in busy.stderr
    after_crash = _check_port(port)
    assert after_crash.returncode == 0 and after_crash.stdout.strip() == "free", after_crash.stderr
