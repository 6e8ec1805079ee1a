"""`dagent run` in a real terminal (tmux) when an answer given there is refused (the call names approvers the
person is not among): the later questions list that call as "also waiting", never as coming after them; once
nothing is left to ask, the terminal says who the prompt waits for and that Ctrl-C leaves it waiting, and the
spinner says so too; Ctrl-C then leaves the prompt waiting for carol, who decides it.

A `dagent worker` process runs the guarded desk plugin and its scripted model (tests/support/guarded_desk.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.temporal.test_cli import cli_env, dagent  # noqa: F401 - fixtures
from tests.temporal.test_terminal import Terminal, terminal_factory  # noqa: F401 - fixtures
from tests.temporal.test_terminal_batch import QUESTION, _calls, _last_question, _prompt_id, _record

pytestmark = pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                                reason="tmux missing: scripts/system-deps installs it")


@pytest.fixture
def guarded_env(cli_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    return {**cli_env, "DAGENT_PLUGINS": "tests.support.guarded_desk:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.support.guarded_desk:model",
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), cli_env.get("PYTHONPATH", "")] if p)}


@pytest.fixture
def guarded_worker(guarded_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen([*DAGENT_CMD, "worker"], env=guarded_env, cwd=REPO_ROOT, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        yield proc
        proc.terminate()
        proc.wait(timeout=15)


def test_a_refused_answer_is_listed_as_also_waiting_and_the_terminal_says_who_it_waits_for(
        guarded_env: dict[str, str], guarded_worker: subprocess.Popen[bytes],
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    command = (f"cd {shlex.quote(str(REPO_ROOT))}; {shlex.quote(sys.executable)} -m durable_agent.cli run "
               "'guarded: wire, pay and email' --user termuser")
    terminal = Terminal(command, guarded_env)
    terminal_factory.append(terminal)
    terminal.wait_for(r"approval needed: \[1\] wire\.send")
    terminal.wait_for(QUESTION)
    prompt_id = _prompt_id(terminal)
    assert "2 more waiting after this one: [2] payment.send" in _last_question(terminal)
    terminal.keys("y", "Enter")  # termuser is not carol: refused

    terminal.wait_for(r"your answer was not applied: .*carol")
    terminal.wait_for(r"approval needed: \[2\] payment\.send")
    terminal.wait_for(QUESTION)
    question = _last_question(terminal)
    assert "1 more waiting after this one: [3] email.send" in question, question
    assert re.search(r'also waiting, for someone who may decide: \[1\] wire\.send \{"to": "Initech"', question)
    assert "[1] wire.send" not in question.split("also waiting")[0]  # never listed as coming after [2]
    terminal.keys("y", "Enter")

    terminal.wait_for(r"approval needed: \[3\] email\.send")
    terminal.wait_for(QUESTION)
    question = _last_question(terminal)
    assert "more waiting after this one" not in question, question
    assert "also waiting, for someone who may decide: [1] wire.send" in question
    terminal.keys("y", "Enter")

    hint = terminal.wait_for(r"^nothing left to ask you: \[1\] wire\.send .* waits for someone who may decide "
                             r"\(approvers: carol\); Ctrl-C leaves the prompt waiting \(`dagent watch (\S+)` "
                             r"follows it again\)$")
    assert hint.group(1) == prompt_id
    terminal.wait_for(r"waiting for someone who may decide wire\.send \(approvers: carol\) \(\d+s\)")  # the spinner
    assert "EXIT=" not in terminal.screen()  # still following: the prompt waits for carol
    calls = _calls(_record(prompt_id, guarded_env))
    assert calls["call_r1_0"]["decision"] is None
    assert [calls[c]["decision"]["by"] for c in ("call_r1_1", "call_r1_2")] == ["termuser", "termuser"]

    terminal.keys("C-c")  # leaves; the prompt keeps waiting
    terminal.wait_for(r"^EXIT=\d+")
    assert "EXIT=130" in terminal.screen() and "Traceback" not in terminal.screen(), terminal.screen()
    approved = dagent("approve", prompt_id, "call_r1_0", "--by", "carol", env=guarded_env)
    assert approved.returncode == 0, approved.stderr
    assert '"status": "wired"' in approved.stdout
