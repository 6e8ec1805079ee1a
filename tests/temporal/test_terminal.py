"""`dagent` in a real terminal (tmux, from Debian's packages): the approval question follows the truth.

Each test runs the CLI inside its own tmux server (a private socket) against the session's dev server and
a `dagent worker` process, reads the screen with `capture-pane`, and acts from a second client as a
colleague would.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable_agent.cli.devserver import free_port
from tests.support.processes import DAGENT_CMD
from tests.temporal.test_cli import cli_env, dagent, worker_process  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing: scripts/system-deps installs it")

SCREEN_DEADLINE = 90.0  # a failure guard only: every wait below ends as soon as the text is on screen


class Terminal:
    """One tmux session running one command, 120x40."""

    def __init__(self, command: str, env: dict[str, str], term: str = "xterm-256color") -> None:
        self.socket = f"dagent-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items()
                           if key.startswith(("TEMPORAL_", "DAGENT_")) or key in ("PATH", "HOME"))
        script = f"export {exports} TERM={term}; cd {shlex.quote(str(Path.cwd()))}; {command}; " \
                 "echo EXIT=$?; sleep 600"
        self._tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", script)

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout

    def screen(self, *, escapes: bool = False) -> str:
        lines = self._tmux("capture-pane", "-p", "-J", "-S", "-200", *(["-e"] if escapes else []), "-t", "t")
        return lines

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + SCREEN_DEADLINE
        while True:
            screen = self.screen()
            if match := re.search(pattern, screen, re.M):
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never appeared on the screen:\n{screen}")
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal_factory() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for terminal in made:
        terminal.close()


def _run_in_terminal(made: list[Terminal], env: dict[str, str], term: str = "xterm-256color") -> Terminal:
    terminal = Terminal(f"{shlex.quote(sys.executable)} -m cli run 'Plan my trip' --user termuser", env, term)
    made.append(terminal)
    return terminal


def test_question_resolves_itself_when_someone_else_approves(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes],  # noqa: F811
        terminal_factory: list[Terminal]) -> None:
    terminal = _run_in_terminal(terminal_factory, cli_env)
    terminal.wait_for(r"Approve payment\.send\? \[y/N\]")
    screen = terminal.screen()
    prompt_id = re.search(r"^prompt (prompt-\w+)$", screen, re.M).group(1)  # type: ignore[union-attr]
    call_id = re.search(r"payment\.send .* \[(call_\w+)\] → waiting for approval", screen).group(1)  # type: ignore[union-attr]
    assert not re.search(r"payment\.send .*→ running", screen)  # the call that waits was never shown as running

    approved = dagent("approve", prompt_id, call_id, "--by", "alice", env=cli_env)
    assert approved.returncode == 0, approved.stderr

    terminal.wait_for(r"^EXIT=\d+")
    screen = terminal.screen()
    assert re.search(r"answered elsewhere: payment\.send approved by alice at \d\d:\d\d:\d\d — no answer needed",
                     screen)
    assert screen.count("answered elsewhere") == 1
    assert re.search(r"payment\.send .* → \{\"status\": \"sent\".*\(approved by alice at", screen)
    assert "Paris will be 18°C with light rain. I attached your trip report. The deposit is paid." in screen
    assert "your answer was not applied" not in screen and "refused" not in screen
    assert "EXIT=0" in screen
    assert "\x1b[" in terminal.screen(escapes=True)  # colours on a colour terminal


def test_answering_at_the_terminal_decides_and_says_who(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes],  # noqa: F811
        terminal_factory: list[Terminal]) -> None:
    terminal = _run_in_terminal(terminal_factory, cli_env, term="dumb")
    terminal.wait_for(r"Approve payment\.send\? \[y/N\]")
    terminal.keys("n", "Enter")
    terminal.wait_for(r"^EXIT=\d+")
    screen = terminal.screen()
    assert re.search(r"payment\.send rejected by termuser at \d\d:\d\d:\d\d: rejected at the terminal", screen)
    assert "answered elsewhere" not in screen
    assert "The payment did not go through" in screen and "EXIT=0" in screen
    assert "\x1b[3" not in terminal.screen(escapes=True)  # a dumb terminal gets no colours


def test_quick_start_keeps_its_server_and_refuses_a_second_on_the_same_file(
        cli_env: dict[str, str], terminal_factory: list[Terminal], tmp_path: Path) -> None:  # noqa: F811
    port, ui_port = free_port(), free_port()
    db = tmp_path / "demo.db"
    demo = Terminal(f"{shlex.quote(sys.executable)} -m cli demo --keep --db-file {db} --port {port} "
                    f"--ui-port {ui_port}", cli_env)
    terminal_factory.append(demo)
    demo.wait_for(r"Approve payment\.send\? \[y/N\]")
    screen = demo.screen()
    prompt_id = re.search(r"^prompt (prompt-\w+):", screen, re.M).group(1)  # type: ignore[union-attr]
    assert f"Temporal UI (while the server runs): http://localhost:{ui_port}/namespaces/default/workflows/" \
           f"{prompt_id}" in screen  # printed while the server is up, before the question

    address = f"127.0.0.1:{port}"
    approved = dagent("approve", prompt_id, "call_r2_0", "--by", "ui-user", "--address", address, env=cli_env)
    assert approved.returncode == 0, approved.stderr
    demo.wait_for(r"Server and worker keep running")
    screen = demo.screen()
    assert "answered elsewhere: payment.send approved by ui-user" in screen
    assert "[7] text    Paris will be 18°C with light rain. I attached your trip report. The deposit is paid." in screen
    assert '{"city"' not in screen.split("[7] text", 1)[1].splitlines()[0]  # no raw JSON in the punch line

    shown = dagent("show", prompt_id, "--address", address, env=cli_env)
    assert shown.returncode == 0 and "state=completed" in shown.stdout  # --keep kept the server up

    second = subprocess.run([*DAGENT_CMD, "demo", "--db-file", str(db), "--no-interactive",
                             "--port", str(free_port()), "--ui-port", str(free_port())], env=cli_env,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert second.returncode != 0
    assert f"{db} is already used by a running Temporal server" in second.stderr

    demo.keys("C-c")
    demo.wait_for(r"EXIT=0$")
