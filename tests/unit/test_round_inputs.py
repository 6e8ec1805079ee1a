"""RoundInputs (workflows/prompt/round_input.py): each model round is sent what changed, the rest stays with the
worker; a worker that lacked it gets the round whole."""

from __future__ import annotations

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import ModelRound, Prompt, TextOutput
from durable_agent.workflows.activity_refs import STORE_HISTORY
from durable_agent.workflows.prompt.context import PromptContext
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.prompt.round_input import RoundInputs
from durable_agent.workflows.protocol import HistoryRef, PromptRequest
from tests.unit.conftest import PlainHost


def _inputs(request: PromptRequest, prompt: Prompt, host: PlainHost | None = None) -> RoundInputs:
    return RoundInputs(PromptContext(request, Recorder(prompt, host or PlainHost())))


def test_a_round_carries_only_the_entries_changed_since_the_last_one() -> None:
    prompt = Prompt(id="p", user_id="u", input="hi")
    inputs = _inputs(PromptRequest(input="hi"), prompt)
    prompt.output += [TextOutput(text="one"), TextOutput(text="two")]
    inputs.changed.update({0, 1})
    first = inputs.next(1, "run-1")
    assert [c.index for c in first.changes or []] == [0, 1] and first.output_count == 2
    assert (first.round, first.run_id, first.prompt.output) == (1, "run-1", [])
    prompt.output.append(TextOutput(text="three"))
    inputs.changed.add(2)
    second = inputs.next(2, "run-1")
    assert [c.index for c in second.changes or []] == [2] and second.output_count == 3
    assert inputs.next(3, "run-1").changes == []


def test_the_header_leaves_out_what_grows_every_round() -> None:
    prompt = Prompt(id="p", user_id="u", input="hi", model_rounds=[ModelRound(round=1, model="m")])
    header = _inputs(PromptRequest(input="hi"), prompt).next(1, "r").prompt
    assert header.model_rounds == [] and header.input == "hi"


def test_history_given_by_value_goes_once_and_a_whole_round_carries_everything() -> None:
    earlier = Prompt(id="old", user_id="u", input="before")
    prompt = Prompt(id="p", user_id="u", input="hi", output=[TextOutput(text="one")])
    inputs = _inputs(PromptRequest(input="hi", history=[earlier]), prompt)
    inputs.changed.add(0)
    first = inputs.next(1, "r")
    assert first.history == [earlier] and first.history_count == 1
    second = inputs.next(2, "r")
    assert second.history == [] and second.history_count == 1  # the worker has it now
    whole = inputs.whole(second)
    assert whole.changes is None and whole.history == [earlier]
    assert [o.text for o in whole.prompt.output] == ["one"]  # type: ignore[union-attr]


async def test_given_history_is_stored_once_then_only_referenced() -> None:
    earlier = Prompt(id="old", user_id="u", input="before")
    host = PlainHost()
    host.answers[STORE_HISTORY.name] = lambda request: HistoryRef(ref="blob-1", count=len(request.records))
    inputs = _inputs(PromptRequest(input="hi", history=[earlier]), Prompt(id="p", user_id="u"), host)
    await inputs.store_given_history()
    await inputs.store_given_history()
    assert [(name, request.records, options["local"]) for name, request, options in host.ran] == [
        (STORE_HISTORY.name, [earlier], True)]  # a local activity: its input is not written to history
    sent = inputs.next(1, "r")
    assert sent.history == [] and sent.history_ref == HistoryRef(ref="blob-1", count=1)
    assert inputs.whole(sent).history == []  # stored: a worker without it loads it from the store


def test_the_activity_summary_names_the_round_the_fallback_and_the_settings() -> None:
    prompt = Prompt(id="p", user_id="u", model="high", model_settings=ModelSettings(temperature=0.5))
    inputs = _inputs(PromptRequest(), prompt)
    assert inputs.summary(3).startswith("model high round 3")
    assert "fallback 1: openai:gpt-x" in inputs.summary(3, 1, "openai:gpt-x")
