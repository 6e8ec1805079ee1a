"""RoundInputs (workflows/prompt/round_input.py): each model round is sent what changed, the rest stays with the
worker; a worker that lacked it gets the round whole."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ActivityError

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import ModelRound, Prompt, TextOutput
from durable_agent.workflows import names
from durable_agent.workflows.activity_refs import MODEL_ROUND, STORE_HISTORY
from durable_agent.workflows.prompt.context import PromptContext
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.prompt.round_input import RoundInputs
from durable_agent.workflows.protocol import HistoryRef, ModelRouting, PromptRequest, RoundInput, RoundResult
from tests.unit.conftest import PlainHost, activity_failure, fails


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


async def test_a_round_goes_again_whole_to_a_worker_that_lacked_part_of_it() -> None:
    host = PlainHost()
    prompt = Prompt(id="p", user_id="u", input="hi", output=[TextOutput(text="one")])
    inputs = _inputs(PromptRequest(input="hi"), prompt, host)
    inputs.changed.add(0)
    sent: list[RoundInput] = []

    def model(round_input: RoundInput) -> RoundResult:
        sent.append(round_input)
        if len(sent) == 1:
            raise activity_failure("cache miss", type=names.TRANSCRIPT_MISSING_ERROR)
        return RoundResult(text="answer")

    host.answers[MODEL_ROUND.name] = model
    assert (await inputs.send(1, "run-1", details="calling")).text == "answer"
    assert [r.changes is None for r in sent] == [False, True] and sent[1].prompt.output == prompt.output
    assert host.details == ["calling"] and host.ran[0][2]["summary"] == "model normal round 1"


async def test_a_round_moves_along_the_fallback_chain_to_the_next_models_queue() -> None:
    host = PlainHost()
    routing = ModelRouting(tier_queue="models", providers={"openai": "openai-queue"})
    inputs = _inputs(PromptRequest(input="hi", model_routing=routing), Prompt(id="p", user_id="u"), host)
    answers = iter([activity_failure("overloaded", 1, "openai:gpt-x", type=names.MODEL_FALLBACK_ERROR),
                    RoundResult(text="from the fallback")])

    def model(round_input: RoundInput) -> RoundResult:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    host.answers[MODEL_ROUND.name] = model
    assert (await inputs.send(1, "run-1", details="calling")).text == "from the fallback"
    [(_, first, _), (_, second, options)] = host.ran
    assert (first.fallback, second.fallback, options["task_queue"]) == (0, 1, "openai-queue")
    assert "fallback 1: openai:gpt-x" in options["summary"]
    host.answers[MODEL_ROUND.name] = fails(activity_failure("bad key", type=names.FATAL_MODEL_ERROR))
    with pytest.raises(ActivityError):
        await inputs.send(2, "run-1", details="calling")


async def test_local_model_calls_run_as_local_activities_unless_models_have_a_queue() -> None:
    host = PlainHost()
    host.answers[MODEL_ROUND.name] = lambda round_input: RoundResult()
    await _inputs(PromptRequest(model_local=True), Prompt(id="p", user_id="u"), host).send(1, "r", details="")
    await _inputs(PromptRequest(model_local=True, model_task_queue="models"), Prompt(id="p", user_id="u"),
                  host).send(1, "r", details="")
    assert [(options["local"], options["task_queue"]) for _, _, options in host.ran] == [(True, None),
                                                                                          (False, "models")]
