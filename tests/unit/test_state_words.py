"""Human output names prompt states as people read them (`waiting for approval`, the pages' words), in the
`dagent run` / `watch` timeline and in `dagent show`; `--json` keeps the wire names."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import get_args

from rich.console import Console

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import Prompt, PromptState
from durable_agent.cli.follow import LiveView
from durable_agent.cli.render import describe_prompt, state_words
from durable_agent.workflows.protocol import StreamEvent

PAGES_SCRIPT = Path(__file__).resolve().parents[2] / "api" / "static" / "app.js"


def test_the_timeline_says_waiting_for_approval_not_the_wire_name() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, width=200))
    for state in get_args(PromptState):
        view.event(StreamEvent(kind=EventKind.STATE_CHANGED, state=state))
    lines = out.getvalue().splitlines()
    assert lines == ["state   running", "state   waiting for approval", "state   completed", "state   stopped",
                     "state   failed", "state   cancelled"]


def test_show_says_waiting_for_approval_and_json_keeps_the_wire_name() -> None:
    prompt = Prompt(id="prompt-1", user_id="ann", state="waiting_for_approval", input="pay")
    first = describe_prompt(prompt)[0]
    assert "state=waiting for approval  user=ann" in first and "waiting_for_approval" not in first
    assert '"state":"waiting_for_approval"' in prompt.model_dump_json()


def test_the_terminal_and_the_pages_use_the_same_words_for_a_waiting_prompt() -> None:
    pages = re.search(r'waiting_for_approval: "([^"]+)"', PAGES_SCRIPT.read_text(encoding="utf-8"))
    assert pages is not None, "the pages' state names moved"
    assert state_words("waiting_for_approval") == pages.group(1) == "waiting for approval"
