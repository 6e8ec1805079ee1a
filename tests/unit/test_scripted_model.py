"""The scripted test model completes each served response (call ids, model name, usage estimate) on its own
copy: the script's responses never change, so a retried round gets the same answer."""

from __future__ import annotations

from durable_agent.agent.messages import ModelRequest, UserMessage
from durable_agent.agent.models import Usage
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls


async def test_served_responses_are_completed_copies_of_the_script() -> None:
    script = [tool_calls(("weather.get", {"city": "Paris"})), text("done")]
    model = ScriptedModel(script, model="m1")
    request = ModelRequest(messages=[UserMessage(text="weather?")], round=1, prompt_id="p")
    first, again = await model.complete(request), await model.complete(request)
    assert [c.id for c in first.tool_calls] == ["call_r1_0"] and first.model == "m1"
    assert first.usage.input_tokens == len("weather?") // 4 and first.usage.model_calls == 1
    assert again == first and again is not first and again.tool_calls[0] is not first.tool_calls[0]
    first.tool_calls[0].arguments["city"] = "Rome"  # type: ignore[index]  # a caller changing its copy
    assert script[0].tool_calls[0].id == "" and script[0].tool_calls[0].arguments == {"city": "Paris"}
    assert script[0].model == "" and script[0].usage == Usage()
    assert (await model.complete(request)).tool_calls[0].arguments == {"city": "Paris"}
    assert len(model.requests) == 3 and model.requests[0].messages is not request.messages


async def test_assert_complete_names_the_rounds_never_served() -> None:
    model = ScriptedModel([tool_calls(("weather.get", {"city": "Paris"})), text("done"), text("extra")], model="m2")
    request = ModelRequest(messages=[UserMessage(text="weather?")], round=1, prompt_id="p")
    await model.complete(request)
    try:
        model.assert_complete()
    except AssertionError as exc:
        assert str(exc) == ("scripted model 'm2': 2 of 3 scripted responses were never served (round 2, 3); "
                            "the prompt ended before the script expected")
    else:
        raise AssertionError("assert_complete passed with two responses never served")
    await model.complete(request.model_copy(update={"round": 2}))
    await model.stream(request.model_copy(update={"round": 3}), on_text=_ignore)
    model.assert_complete()  # every response served once: passes
    await model.complete(request)  # a retried round serves the same response again: still complete
    model.assert_complete()


async def test_assert_complete_checks_nothing_for_a_function_script() -> None:
    model = ScriptedModel(lambda request: text("hi"))
    model.assert_complete()
    await model.complete(ModelRequest(messages=[UserMessage(text="x")], round=1, prompt_id="p"))
    model.assert_complete()


async def _ignore(chunk: str) -> None:
    return None
