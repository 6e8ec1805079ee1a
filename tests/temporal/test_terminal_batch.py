"""`dagent run` in a real terminal (tmux) with several calls waiting for approval at once: one question at a
time, each answer applied to exactly the call asked, the others listed; a question decided elsewhere goes away
saying who and how; keys typed when no question was asked answer nothing and do not reach the shell.

A `dagent worker` process runs the batch desk plugin and its scripted model (tests/support/batch_desk.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.temporal.test_cli import cli_env, dagent  # noqa: F401 - fixtures
from tests.temporal.test_terminal import Terminal, terminal_factory  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                                reason="tmux missing: scripts/system-deps installs it")

BATCH_TEXT = "batch: pay both invoices and email ACME"
QUESTION = r"Approve (\S+)\? \[y/N\]: *$"


@pytest.fixture
def desk_env(cli_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    return {**cli_env, "DAGENT_PLUGINS": "tests.support.batch_desk:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.support.batch_desk:model",
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), cli_env.get("PYTHONPATH", "")] if p)}


@pytest.fixture
def desk_worker(desk_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen([*DAGENT_CMD, "worker"], env={**desk_env, "BATCH_DESK_EMAIL_SECONDS": "1.5"},
                                cwd=REPO_ROOT, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        yield proc
        proc.terminate()
        proc.wait(timeout=15)


def _run(made: list[Terminal], env: dict[str, str]) -> Terminal:
    """`dagent run` of a batch; after it exits, whatever reached the shell's input in 2 s is printed."""
    command = (f"cd {shlex.quote(str(REPO_ROOT))}; {shlex.quote(sys.executable)} -m durable_agent.cli run "
               f"{shlex.quote(BATCH_TEXT)} --user termuser; echo EXIT=$?; read -r -t 2 LEFT; echo \"LEFT=[$LEFT]\"")
    terminal = Terminal(command, env)
    made.append(terminal)
    return terminal


def _last_question(terminal: Terminal) -> str:
    """The screen from the last `approval needed` headline on."""
    screen = terminal.screen()
    return screen[screen.rindex("approval needed: "):]


def _record(prompt_id: str, env: dict[str, str]) -> dict[str, Any]:
    shown = dagent("show", prompt_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def _calls(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in record["output"] if o["type"] == "tool"}


def _prompt_id(terminal: Terminal) -> str:
    return re.search(r"^prompt (prompt-\w+)$", terminal.screen(), re.M).group(1)  # type: ignore[union-attr]


def test_a_batch_of_three_is_asked_one_at_a_time_and_each_answer_goes_to_the_call_asked(
        desk_env: dict[str, str], desk_worker: subprocess.Popen[bytes],
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    terminal = _run(terminal_factory, desk_env)
    terminal.keys("y", "Enter")  # typed before any question: must answer nothing
    terminal.wait_for(r"approval needed: \[1\] payment\.send")
    terminal.wait_for(QUESTION)
    time.sleep(1.0)  # a typed-ahead "y" would have been taken by now
    screen = terminal.screen()
    prompt_id = _prompt_id(terminal)
    assert screen.count("Approve ") == 1, screen  # one question on screen, not three on top of each other
    assert "approved by termuser" not in screen
    assert re.search(r'approval needed: \[1\] payment\.send \{"to": "ACME Corp", "amount": 480\} — '
                     r"Sending \$480 requires approval\.", screen)
    assert re.search(r'2 more waiting after this one: \[2\] payment\.send \{"to": "Globex", "amount": 120\}, '
                     r"\[3\] email\.send", screen)
    assert not re.search(r"→ running", screen)  # the waiting calls were never shown as running
    for call in ("call_r1_0", "call_r1_1", "call_r1_2"):
        assert re.search(rf"\[{call}\] → waiting for approval", screen)

    terminal.keys("y", "Enter")
    terminal.wait_for(r"approval needed: \[2\] payment\.send")
    terminal.wait_for(QUESTION)
    question = _last_question(terminal)
    assert "1 more waiting after this one: [3] email.send" in question
    assert re.search(r"\[1\] payment\.send approved by termuser at \d\d:\d\d:\d\d · 2 more waiting",
                     terminal.screen())
    decided_first = _calls(_record(prompt_id, desk_env))
    assert decided_first["call_r1_0"]["decision"]["by"] == "termuser"
    assert decided_first["call_r1_1"]["decision"] is None and decided_first["call_r1_2"]["decision"] is None

    terminal.keys("n", "Enter")
    terminal.wait_for(r"approval needed: \[3\] email\.send")
    terminal.wait_for(QUESTION)
    assert "more waiting after this one" not in _last_question(terminal)
    terminal.keys("y", "Enter")  # approves email.send, which takes 1.5 s (desk_worker): dagent runs on meanwhile
    time.sleep(0.1)
    terminal.keys("echo", "Space", "leaked", "Enter")  # typed while the prompt finishes: not for the shell
    terminal.wait_for(r"^LEFT=\[.*\]$")
    screen = terminal.screen()
    assert "EXIT=0" in screen and "LEFT=[]" in screen, screen
    assert screen.count("Approve ") == 3 and "answered elsewhere" not in screen
    assert "your answer was not applied" not in screen

    calls = _calls(_record(prompt_id, desk_env))
    assert [(c["tool"], c["decision"]["decision"], c["decision"]["by"]) for c in calls.values()] == [
        ("payment.send", "approved", "termuser"), ("payment.send", "rejected", "termuser"),
        ("email.send", "approved", "termuser")]
    assert calls["call_r1_0"]["result"]["output"]["to"] == "ACME Corp"
    assert calls["call_r1_1"]["result"]["error"] == "The call was rejected by termuser: rejected at the terminal"
    assert calls["call_r1_2"]["result"]["output"] == {"status": "sent", "to": "ceo@acme.example"}


def test_a_question_decided_elsewhere_goes_away_saying_who_and_how(
        desk_env: dict[str, str], desk_worker: subprocess.Popen[bytes],
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    terminal = _run(terminal_factory, desk_env)
    terminal.wait_for(r"approval needed: \[1\] payment\.send")
    terminal.wait_for(QUESTION)
    prompt_id = _prompt_id(terminal)
    terminal.keys("n")  # half typed when alice decides: must not answer the next question

    approved = dagent("approve", prompt_id, "call_r1_0", "--by", "alice", "--input", '{"amount": 450}', env=desk_env)
    assert approved.returncode == 0, approved.stderr
    assert re.search(r"approved by alice at \d\d:\d\d:\d\d \(amount changed 480 → 450 by alice\); runs when the "
                     r"other 2 decisions are in", approved.stdout), approved.stdout

    terminal.wait_for(r"answered elsewhere: payment\.send approved by alice at \d\d:\d\d:\d\d "
                      r"\(amount changed 480 → 450 by alice\) — no answer needed")
    terminal.wait_for(r"approval needed: \[2\] payment\.send")
    terminal.wait_for(QUESTION)
    terminal.keys("y", "Enter")  # with the stale "n" this would read "ny": a rejection
    terminal.wait_for(r"approval needed: \[3\] email\.send")
    terminal.wait_for(QUESTION)
    terminal.keys("n", "Enter")
    terminal.wait_for(r"^LEFT=\[.*\]$")
    screen = terminal.screen()
    assert "EXIT=0" in screen, screen
    assert screen.count("answered elsewhere") == 1 and screen.count("Approve ") == 3
    assert re.search(r'payment\.send \{"to": "ACME Corp", "amount": 450\} \[call_r1_0\] → .*"amount": 450\.0.*'
                     r"\(approved by alice at \d\d:\d\d:\d\d\)  \(amount changed 480 → 450 by alice\)", screen)

    calls = _calls(_record(prompt_id, desk_env))
    first = calls["call_r1_0"]
    assert first["decision"]["by"] == "alice" and first["decision"]["original_input"]["amount"] == 480
    assert first["input"]["amount"] == 450
    assert calls["call_r1_1"]["decision"]["decision"] == "approved"
    assert calls["call_r1_1"]["decision"]["by"] == "termuser"
    assert calls["call_r1_2"]["decision"]["decision"] == "rejected"

    shown = dagent("show", prompt_id, env=desk_env)
    assert "(amount changed 480 → 450 by alice)" in shown.stdout


@pytest.fixture
def clerk_worker(desk_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**desk_env, "DAGENT_PLUGINS": "tests.support.batch_desk:plugin,tests.support.batch_desk:delegation"}
    with open(tmp_path / "clerk-worker.log", "wb") as log:
        proc = subprocess.Popen([*DAGENT_CMD, "worker"], env=env, cwd=REPO_ROOT, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        yield proc
        proc.terminate()
        proc.wait(timeout=15)


def test_a_sub_agents_question_goes_away_when_decided_elsewhere_while_its_call_runs_on(
        desk_env: dict[str, str], clerk_worker: subprocess.Popen[bytes],
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    """The clerk (a sub-agent) waits for two payments. alice approves the first through the top prompt: the
    question on screen goes away at once, saying who and how — while the sub-agent's call still runs (its
    second payment waits), not only when that call ends — and the second is asked next."""
    command = (f"cd {shlex.quote(str(REPO_ROOT))}; {shlex.quote(sys.executable)} -m durable_agent.cli run "
               f"'delegate: pay the invoices' --user termuser; echo EXIT=$?")
    terminal = Terminal(command, desk_env)
    terminal_factory.append(terminal)
    terminal.wait_for(r"approval needed: .*payment\.send \{\"to\": \"ACME Corp\", \"amount\": 480\}")
    terminal.wait_for(QUESTION)
    prompt_id = _prompt_id(terminal)
    first = "call_r1_0/call_r1_0"
    approved = dagent("approve", prompt_id, first, "--by", "alice", env=desk_env)
    assert approved.returncode == 0, approved.stderr

    terminal.wait_for(r"answered elsewhere: payment\.send approved by alice at \d\d:\d\d:\d\d — no answer needed")
    terminal.wait_for(r"approval needed: .*payment\.send \{\"to\": \"Globex\", \"amount\": 120\}")
    terminal.wait_for(QUESTION)
    top = _record(prompt_id, desk_env)
    delegate = _calls(top)["call_r1_0"]
    assert delegate["finished_at"] is None, delegate  # withdrawn on the decision, while the sub-agent's call runs
    terminal.keys("y", "Enter")
    terminal.wait_for(r"^EXIT=\d+")
    screen = terminal.screen()
    assert "EXIT=0" in screen and screen.count("answered elsewhere") == 1, screen
    assert screen.count("Approve payment.send? [y/N]") == 2, screen
    child = _record(delegate["child_prompt_id"], desk_env)
    decided = [(c["input"]["to"], c["decision"]["by"]) for c in _calls(child).values()]
    assert decided == [("ACME Corp", "alice"), ("Globex", "termuser")], decided
