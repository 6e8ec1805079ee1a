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
