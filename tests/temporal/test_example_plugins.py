"""The example plugins (skills, files, widgets) on a real Temporal dev server, driven by a scripted model."""

from __future__ import annotations

import json

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.messages import Message, ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import FileOutput, ToolError, ToolOutput, ToolSuccess, WidgetOutput
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.plugins import files, skills, widgets
from durable_agent.plugins.widgets import fallback_text
from tests.support.workers import agent_worker


def tool_ids(request: ModelRequest) -> list[str]:
    return [t.id for t in request.tools]


def message_texts(messages: list[Message]) -> str:
    return "\n".join(json.dumps(m.model_dump(mode="json")) for m in messages)


async def test_skill_activation_and_deactivation_change_the_tools(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([
        tool_calls(("skill.activate", {"skill": "email"})),
        tool_calls(("email.send", {"to": "ann@example.com", "subject": "Hi"})),
        tool_calls(("skill.deactivate", {"skill": "email"})),
        text("Sent."),
    ])
    async with agent_worker(dev_env, plugins=[skills.plugin], model=model) as client:
        prompt = await client.run("email Ann", user_id="u1")
    assert prompt.state == "completed"
    round1, round2, round3, round4 = model.requests
    assert tool_ids(round1) == ["skill.activate", "skill.deactivate"]
    assert "Active skills: none." in round1.instructions
    # Activated in round 1 -> offered from round 2, and the context says so.
    assert tool_ids(round2) == ["skill.activate", "skill.deactivate", "email.send"]
    assert "Active skills: email." in round2.instructions
    assert "calendar" in round2.instructions  # the skills that exist are listed too
    assert "calendar.add" not in tool_ids(round2)
    sent = prompt.output[1]
    assert isinstance(sent, ToolOutput) and isinstance(sent.result, ToolSuccess)
    # Deactivated in round 3 -> gone in round 4.
    assert tool_ids(round4) == ["skill.activate", "skill.deactivate"]
    assert "Active skills: none." in round4.instructions
    assert prompt.plugin_state["skills"] == {"active": []}
    assert round3.tools != round4.tools


async def test_unknown_skill_is_an_error_result(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([tool_calls(("skill.activate", {"skill": "telepathy"})), text("Sorry.")])
    async with agent_worker(dev_env, plugins=[skills.plugin], model=model) as client:
        prompt = await client.run("read my mind")
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolError)
    assert "Unknown skill 'telepathy'. Available skills: calendar, email." in entry.result.error
    seen = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert seen and seen[0].is_error
    assert tool_ids(model.requests[1]) == ["skill.activate", "skill.deactivate"]


async def test_file_write_records_a_file_the_model_sees_only_as_a_summary(dev_env: WorkflowEnvironment,
                                                                          tmp_path) -> None:
    secret = "The launch code is 0000-TOP-SECRET-4242."
    content = f"# Plan\n\n{secret}\n"

    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(("file.write", {"name": "plan.md", "content": content, "media_type": "text/markdown"}))
        if request.round == 2:
            written = next(m for m in request.messages if isinstance(m, ToolResultMessage))
            ref = json.loads(written.content)["content_ref"]
            return tool_calls(("file.read", {"content_ref": ref}))
        return text("Here is your plan.")

    model = ScriptedModel(script)
    async with agent_worker(dev_env, plugins=[files.plugin], model=model, file_dir=str(tmp_path)) as client:
        prompt = await client.run("write the plan down")
    assert [o.type for o in prompt.output][:2] == ["tool", "file"]
    written, attached = prompt.output[0], prompt.output[1]
    assert isinstance(written, ToolOutput) and isinstance(attached, FileOutput)
    assert attached.tool_call_id == written.id
    assert attached.name == "plan.md" and attached.media_type == "text/markdown"
    assert attached.size == len(content.encode())
    assert (tmp_path / attached.content_ref.removeprefix("dir:")).read_text() == content
    assert attached.content_ref.startswith(f"dir:v0/ns/default/files/wi/{prompt.id}/")
    # The next model call sees the summary and the reference; the content appears only in the model's own
    # call arguments (it wrote them), never in the tool result or the file's projection.
    following = model.requests[1].messages
    assert [m.kind for m in following] == ["user", "tool_call", "tool_result", "assistant"]
    not_written_by_model = message_texts([m for m in following if m.kind != "tool_call"])
    assert attached.summary in not_written_by_model and attached.content_ref in not_written_by_model
    assert secret not in not_written_by_model and "launch code" not in not_written_by_model
    # file.read brings it back when the model asks for it.
    read = prompt.output[2]
    assert isinstance(read, ToolOutput) and isinstance(read.result, ToolSuccess)
    assert isinstance(read.result.output, dict) and read.result.output["content"] == content


async def test_file_read_of_a_missing_reference_is_an_error(dev_env: WorkflowEnvironment, tmp_path) -> None:
    model = ScriptedModel([tool_calls(("file.read", {"content_ref": "sha256:" + "0" * 64})), text("none")])
    async with agent_worker(dev_env, plugins=[files.plugin], model=model, file_dir=str(tmp_path)) as client:
        prompt = await client.run("read")
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolError)
    assert "No file with reference" in entry.result.error


async def test_chart_widget_is_recorded_but_never_shown_to_the_model(dev_env: WorkflowEnvironment) -> None:
    points = [1.5, 42.4242, 7.0]
    model = ScriptedModel([tool_calls(("chart.show", {"title": "Rainfall", "points": points})), text("There.")])
    async with agent_worker(dev_env, plugins=[widgets.plugin], model=model) as client:
        prompt = await client.run("chart it")
    assert [o.type for o in prompt.output] == ["tool", "widget", "text"]
    shown, widget = prompt.output[0], prompt.output[1]
    assert isinstance(shown, ToolOutput) and isinstance(widget, WidgetOutput)
    assert widget.widget == "chart" and widget.tool_call_id == shown.id
    assert widget.data == {"title": "Rainfall", "points": points}
    assert widget.fallback_text == fallback_text("Rainfall", points) == "Rainfall: 1.5, 42.4242, 7"
    # The model sees its call and the tool's summary; nothing at all for the widget.
    following = model.requests[1].messages
    assert [m.kind for m in following] == ["user", "tool_call", "tool_result"]
    seen = message_texts(following)
    assert "Displayed a chart titled 'Rainfall' with 3 points" in seen
    assert widget.fallback_text not in seen and '"chart"' not in seen
