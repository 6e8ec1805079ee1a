"""The answer line belongs to `dagent` while a question is open: whatever happens on screen meanwhile (another
call of the batch decided elsewhere, the question asked again below it), the answer applied is the one the
screen shows, never keys the terminal kept out of sight.

The person half types an answer, a colleague decides each other call of the batch (in both orders, approving
or rejecting), the person types the rest and Enter; the decision recorded must be what the last question line
showed. Also a sub-agent's question, whose other call is decided through the top prompt meanwhile.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time

import pytest

from tests.support.processes import REPO_ROOT
from tests.temporal.test_cli import cli_env, dagent, worker_process  # noqa: F401 - fixtures
from tests.temporal.test_terminal import Terminal, terminal_factory  # noqa: F401 - fixtures
from tests.temporal.test_terminal_batch import (  # noqa: F401 - fixtures
    QUESTION,
    _calls,
    _prompt_id,
    _record,
    _run,
    clerk_worker,
    desk_env,
    desk_worker,
)

pytestmark = pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                                reason="tmux missing: scripts/system-deps installs it")

ANSWER_LINE = r"^Approve payment\.send\? \[y/N\]: ?(.*)$"


def _shown_answer(terminal: Terminal, asked_times: int) -> str:
    """The answer on the question's line as asked the `asked_times`-th time (it was answered with Enter)."""
    lines = re.findall(ANSWER_LINE, terminal.screen(), re.M)
    assert len(lines) >= asked_times, terminal.screen()
    return lines[asked_times - 1].rstrip()


def _decide(prompt_id: str, call: str, verdict: str, env: dict[str, str]) -> None:
    args = ["approve", prompt_id, call, "--by", "bob"] if verdict == "approve" else \
        ["reject", prompt_id, call, "--by", "bob", "--reason", "not yet"]
    decided = dagent(*args, env=env)
    assert decided.returncode == 0, decided.stderr


def _wait_decided_in_child(prompt_id: str, call: str, env: dict[str, str]) -> None:
    """Until the sub-agent of the top prompt's first call has recorded a decision on `call` (a decision through
    the top prompt is forwarded to it, so the CLI's exit does not mean it is taken yet)."""
    deadline = time.monotonic() + 30
    while True:
        child_id = _calls(_record(prompt_id, env))["call_r1_0"].get("child_prompt_id")
        if child_id and _calls(_record(child_id, env)).get(call, {}).get("decision"):
            return
        assert time.monotonic() < deadline, f"{call} not decided in the sub-agent of {prompt_id}"
        time.sleep(0.2)


def _asked_again(terminal: Terminal, times: int) -> None:
    deadline = time.monotonic() + 60
    while len(re.findall(r"Approve payment\.send\? \[y/N\]:", terminal.screen())) < times:
        assert time.monotonic() < deadline, terminal.screen()
        time.sleep(0.2)


@pytest.mark.parametrize(("others", "pieces"), [
    ((("call_r1_1", "approve"), ("call_r1_2", "reject")), ("y", "e", "s")),  # the screen ends with "yes"
    ((("call_r1_2", "approve"), ("call_r1_1", "reject")), ("y", "", "y")),  # "yy": a rejection, visibly
    ((("call_r1_2", "reject"), ("call_r1_1", "approve")), ("n", "BSpace", "y")),  # "y" after erasing "n"
    ((("call_r1_1", "reject"), ("call_r1_2", "approve")), ("ye", "", "")),  # "ye": a rejection, visibly
], ids=["yes-2then3", "yy-3then2", "erased-3then2", "ye-2then3"])
def test_what_is_applied_is_what_the_screen_shows_while_others_decide_the_rest_of_the_batch(
        others: tuple[tuple[str, str], ...], pieces: tuple[str, ...], desk_env: dict[str, str],  # noqa: F811
        desk_worker: subprocess.Popen[bytes], terminal_factory: list[Terminal]) -> None:  # noqa: F811
    terminal = _run(terminal_factory, desk_env)
    terminal.wait_for(r"approval needed: \[1\] payment\.send")
    terminal.wait_for(QUESTION)
    prompt_id = _prompt_id(terminal)
    typed = ""
    for asked, ((call, verdict), piece) in enumerate(zip(others, pieces, strict=False), start=1):
        if piece:
            terminal.keys(piece)
            typed = typed[:-1] if piece == "BSpace" else typed + piece
        time.sleep(0.3)  # the keys are in before the colleague acts
        _decide(prompt_id, call, verdict, desk_env)
        terminal.wait_for(rf"\[{int(call[-1]) + 1}\] \S+ {verdict.rstrip('e')}ed by bob")
        _asked_again(terminal, asked + 1)  # the question, printed again below the decision line
        assert _shown_answer(terminal, asked + 1) == typed, terminal.screen()
    last = pieces[len(others)]
    if last:
        terminal.keys(last)
        typed = typed[:-1] if last == "BSpace" else typed + last
    terminal.keys("Enter")
    terminal.wait_for(r"^LEFT=\[.*\]$")
    shown = _shown_answer(terminal, len(others) + 1)
    assert shown == typed, terminal.screen()

    first = _calls(_record(prompt_id, desk_env))["call_r1_0"]["decision"]
    expected = "approved" if shown.strip().lower() in ("y", "yes") else "rejected"
    assert (first["decision"], first["by"]) == (expected, "termuser"), (shown, first, terminal.screen())


def test_a_sub_agents_question_keeps_what_the_screen_shows(
        desk_env: dict[str, str], clerk_worker: subprocess.Popen[bytes],  # noqa: F811
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    """The clerk (a sub-agent) waits for two payments; the person half types "y" for the first while bob
    rejects the second through the top prompt; the person types "es" and Enter: "yes", shown and applied. The
    second question, decided before it was asked, goes away at once saying who decided."""
    command = (f"cd {shlex.quote(str(REPO_ROOT))}; {shlex.quote(sys.executable)} -m durable_agent.cli run "
               f"'delegate: pay the invoices' --user termuser; echo EXIT=$?; read -r -t 2 LEFT; "
               f"echo \"LEFT=[$LEFT]\"")
    terminal = Terminal(command, desk_env)
    terminal_factory.append(terminal)
    terminal.wait_for(r"approval needed: .*payment\.send \{\"to\": \"ACME Corp\", \"amount\": 480\}")
    terminal.wait_for(QUESTION)
    prompt_id = _prompt_id(terminal)
    terminal.keys("y")
    time.sleep(0.3)
    _decide(prompt_id, "call_r1_0/call_r1_1", "reject", desk_env)
    _wait_decided_in_child(prompt_id, "call_r1_1", desk_env)  # forwarded, taken, and reported back to the top
    time.sleep(1.5)  # whatever the terminal prints about it, it has printed
    terminal.keys("es", "Enter")
    terminal.wait_for(r"^LEFT=\[.*\]$")
    screen = terminal.screen()
    answers = [a.rstrip() for a in re.findall(ANSWER_LINE, screen, re.M)]
    assert answers == ["yes", ""], screen  # the second question (Globex, decided by bob) was withdrawn unanswered
    assert re.search(r'approval needed: payment\.send \{"to": "ACME Corp", "amount": 480\} — Sending \$480 requires '
                     r"approval\. \(asked by the desk\.delegate sub-agent of \[1\], call call_r1_0/call_r1_0\)",
                     screen), screen  # which sub-agent asks; [1] is its call in this prompt
    assert re.search(r"answered elsewhere: payment\.send rejected by bob at \d\d:\d\d:\d\d: not yet — no answer needed",
                     screen), screen
    assert "EXIT=0" in screen and "LEFT=[]" in screen, screen
    top = _record(prompt_id, desk_env)
    child = _record(_calls(top)["call_r1_0"]["child_prompt_id"], desk_env)
    decided = [(c["input"]["to"], c["decision"]["decision"], c["decision"]["by"]) for c in _calls(child).values()]
    assert decided == [("ACME Corp", "approved", "termuser"), ("Globex", "rejected", "bob")], decided


def test_chat_at_a_terminal_types_normally_between_prompts_and_owns_the_line_for_questions(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes],  # noqa: F811
        terminal_factory: list[Terminal]) -> None:  # noqa: F811
    """`dagent chat`: the message line is the terminal's own (echoed by it), the question's line is dagent's;
    after the prompt the terminal echoes again, and an empty line ends the session."""
    command = (f"cd {shlex.quote(str(REPO_ROOT))}; {shlex.quote(sys.executable)} -m durable_agent.cli chat "
               "--user termuser")
    terminal = Terminal(command, cli_env)
    terminal_factory.append(terminal)
    terminal.wait_for(r"^you> $")
    terminal.keys("Plan my trip")
    terminal.wait_for(r"^you> Plan my trip$")  # the terminal echoes the message as typed
    terminal.keys("Enter")
    terminal.wait_for(r"Approve payment\.send\? \[y/N\]: *$")
    terminal.keys("y")
    terminal.wait_for(r"Approve payment\.send\? \[y/N\]: y$")  # echoed by dagent
    terminal.keys("Enter")
    terminal.wait_for(r"approved by termuser")
    terminal.wait_for(r"^you> $")
    terminal.keys("hello")
    terminal.wait_for(r"^you> hello$")  # the terminal's echo is back
    terminal.keys("BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "Enter")
    terminal.wait_for(r"^EXIT=0$")
