"""The round loop on a real Temporal dev server, driven by a scripted model."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.models import FileOutput, TextOutput, ToolError, ToolOutput, ToolSuccess, WidgetOutput
from durable_agent.agent.plugins import Plugin, PrepareContext
from durable_agent.agent.providers.base import FatalModelError
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from tests.support.workers import agent_worker


class AddInput(BaseModel):
    a: int
    b: int


@tool("math.add")
async def add(args: AddInput, ctx: ToolContext) -> int:
    """Add two integers."""
    return args.a + args.b


class NoteInput(BaseModel):
    note: str


@tool("notes.save")
async def save_note(args: NoteInput, ctx: ToolContext) -> str:
    """Save a note in the plugin state."""
    notes = ctx.state.setdefault("notes", [])
    assert isinstance(notes, list)
    notes.append(args.note)
    return f"saved ({len(notes)} notes)"


@tool("media.show")
async def show_media(args: NoteInput, ctx: ToolContext) -> str:
    """Emit a widget and a file."""
    ctx.display_widget("card", {"note": args.note}, fallback_text=args.note)
    ctx.add_file("note.txt", args.note, summary=f"a note of {len(args.note)} characters")
    return "shown"


math_plugin = Plugin("math", tools=[add], instructions="You can add numbers.")


class NotesPlugin(Plugin):
    """Offers notes.save; from round 2 on also notes.count's context, reading state written by the tool."""

    name = "notes"
    tools = (save_note,)

    async def prepare(self, ctx: PrepareContext) -> None:
        ctx.add_tool(save_note)
        notes = ctx.state.get("notes", [])
        ctx.add_context(f"There are {len(notes) if isinstance(notes, list) else 0} saved notes.")
        ctx.state["prepared_rounds"] = int(ctx.state.get("prepared_rounds", 0) or 0) + 1  # type: ignore[arg-type]


class LateToolPlugin(Plugin):
    """math.add is offered only from round 2: tools may appear mid-prompt."""

    name = "late"
    tools = (add,)

    async def prepare(self, ctx: PrepareContext) -> None:
        if ctx.round >= 2:
            ctx.add_tool(add)


async def test_multi_round_tool_loop_records_everything_in_order(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([
        tool_calls(("math.add", {"a": 2, "b": 3}), text="Adding."),
        tool_calls(("math.add", {"a": 5, "b": 10})),
        text("The answer is 15."),
    ])
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        prompt = await client.run("What is 2+3+10?", user_id="u1")
    assert prompt.state == "completed"
    assert [type(o).__name__ for o in prompt.output] == ["TextOutput", "ToolOutput", "ToolOutput", "TextOutput"]
    first, second = prompt.output[1], prompt.output[2]
    assert isinstance(first, ToolOutput) and first.result == ToolSuccess(output=5)
    assert isinstance(second, ToolOutput) and second.result == ToolSuccess(output=15)
    assert first.started_at <= first.finished_at  # type: ignore[operator]
    assert prompt.output[-1] == TextOutput(text="The answer is 15.")
    assert prompt.rounds == 3 and prompt.usage.model_calls == 3
    # Round 3 saw both calls and their results, in order, and the plugin's instructions.
    last = model.requests[2]
    assert "You can add numbers." in last.instructions
    results = [m for m in last.messages if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["5", "15"]
    assert isinstance(last.messages[0], UserMessage) and last.messages[0].text == "What is 2+3+10?"


async def test_usage_is_summed_over_model_calls(dev_env: WorkflowEnvironment) -> None:
    from durable_agent.agent.models import Usage

    model = ScriptedModel([
        tool_calls(("math.add", {"a": 1, "b": 1})).model_copy(
            update={"usage": Usage(input_tokens=100, output_tokens=10, cached_tokens=5, model_calls=1)}),
        text("2").model_copy(update={"usage": Usage(input_tokens=120, output_tokens=3, reasoning_tokens=7,
                                                     model_calls=1)}),
    ])
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        prompt = await client.run("1+1?")
    model.assert_complete()  # both rounds ran: the usage below is the sum of two model calls, not one
    assert prompt.usage == Usage(input_tokens=220, output_tokens=13, cached_tokens=5, reasoning_tokens=7,
                                 model_calls=2)


async def test_tool_appearing_from_round_two(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([
        tool_calls(("math.add", {"a": 1, "b": 2})),
        tool_calls(("math.add", {"a": 1, "b": 2})),
        text("done"),
    ])
    async with agent_worker(dev_env, plugins=[LateToolPlugin()], model=model) as client:
        prompt = await client.run("add")
    model.assert_complete()  # the retry in round 2 was followed by the final answer in round 3
    assert [t.id for t in model.requests[0].tools] == []
    assert [t.id for t in model.requests[1].tools] == ["math.add"]
    round1, round2 = prompt.output[0], prompt.output[1]
    assert isinstance(round1, ToolOutput) and isinstance(round1.result, ToolError)
    assert "Unknown tool 'math.add'" in round1.result.error
    assert isinstance(round2, ToolOutput) and round2.result == ToolSuccess(output=3)


async def test_plugin_state_written_by_tool_is_read_by_prepare(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([
        tool_calls(("notes.save", {"note": "buy milk"})),
        tool_calls(("notes.save", {"note": "call mum"})),
        text("saved"),
    ])
    async with agent_worker(dev_env, plugins=[NotesPlugin()], model=model) as client:
        prompt = await client.run("remember things")
    model.assert_complete()
    for saved, request in zip([0, 1, 2], model.requests, strict=True):
        assert f"There are {saved} saved notes." in request.instructions
    assert prompt.plugin_state["notes"] == {"notes": ["buy milk", "call mum"], "prepared_rounds": 3}


async def test_invalid_arguments_and_unknown_tool_are_fed_back(dev_env: WorkflowEnvironment) -> None:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(("math.add", {"a": "not a number", "b": 1}), ("math.nope", {}))
        return text("ok")

    model = ScriptedModel(script)
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        prompt = await client.run("go")
    bad_args, unknown = prompt.output[0], prompt.output[1]
    assert isinstance(bad_args, ToolOutput) and isinstance(bad_args.result, ToolError)
    assert "Invalid arguments for tool 'math.add'" in bad_args.result.error and "a:" in bad_args.result.error
    assert isinstance(unknown, ToolOutput) and isinstance(unknown.result, ToolError)
    assert unknown.result.error == "Unknown tool 'math.nope'. Available tools: math.add."
    seen = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [m.is_error for m in seen] == [True, True]
    assert prompt.state == "completed"


async def test_max_rounds_force_completes(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(lambda request: tool_calls(("math.add", {"a": request.round, "b": 0})))
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        prompt = await client.run("loop forever", max_rounds=3)
    assert prompt.state == "stopped" and prompt.force_completed and prompt.stop is not None
    assert prompt.rounds == 3 and len(model.requests) == 3
    assert [o.result for o in prompt.output if isinstance(o, ToolOutput)] == [
        ToolSuccess(output=1), ToolSuccess(output=2), ToolSuccess(output=3)]


async def test_widget_and_file_follow_their_calls_batch(dev_env: WorkflowEnvironment, tmp_path) -> None:
    """The calls of one response are recorded together; side outputs follow them, linked by tool_call_id."""
    model = ScriptedModel([tool_calls(("media.show", {"note": "hello"}), ("math.add", {"a": 1, "b": 1})),
                           text("shown")])
    plugin = Plugin("media", tools=[show_media, add])
    async with agent_worker(dev_env, plugins=[plugin], model=model, file_dir=str(tmp_path)) as client:
        prompt = await client.run("show")
    kinds = [o.type for o in prompt.output]
    assert kinds == ["tool", "tool", "widget", "file", "text"]
    widget, file = prompt.output[2], prompt.output[3]
    assert isinstance(widget, WidgetOutput) and widget.data == {"note": "hello"}
    assert widget.tool_call_id == file.tool_call_id == prompt.output[0].id  # type: ignore[union-attr]
    assert isinstance(file, FileOutput) and file.size == 5 and file.summary == "a note of 5 characters"
    assert file.content_ref.startswith(f"dir:v0/ns/default/files/wi/{prompt.id}/d/sha256/")
    assert (tmp_path / file.content_ref.removeprefix("dir:")).read_text() == "hello"
    assert await client.read_file(file.content_ref) == b"hello"
    # The model saw the file summary, never the widget.
    texts = [getattr(m, "text", "") for m in model.requests[1].messages]
    assert any("a note of 5 characters" in t for t in texts)
    assert not any("card" in t for t in texts)


async def test_system_initiated_prompt_without_input(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([text("Good morning! Here is your reminder.")])
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        prompt = await client.run(None, user_id="scheduler")
    assert prompt.input is None and prompt.state == "completed"
    assert len(model.requests[0].messages) == 1  # a neutral placeholder, no invented user text
    assert prompt.output == [TextOutput(text="Good morning! Here is your reminder.")]


async def test_fatal_model_error_fails_prompt_with_reason(dev_env: WorkflowEnvironment) -> None:
    def script(request: ModelRequest) -> ModelResponse:
        raise FatalModelError("openai gpt-x returned 401: invalid api key", status=401)

    async with agent_worker(dev_env, plugins=[math_plugin], model=ScriptedModel(script)) as client:
        handle = await client.start("hi")
        prompt = await handle.result()
        description = await handle.workflow.describe()
    assert prompt.state == "failed"
    assert prompt.error is not None and "401" in prompt.error
    assert description.status == WorkflowExecutionStatus.FAILED


async def test_search_attributes_track_state(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([text("hello")])
    async with agent_worker(dev_env, plugins=[math_plugin], model=model) as client:
        handle = await client.start("hi", user_id="alice", conversation_id="conv-7")
        await handle.result()
        description = await handle.workflow.describe()
    values = {pair.key.name: pair.value for pair in description.typed_search_attributes
              if pair.key.name in {"PromptState", "UserId", "ConversationId"}}
    assert values == {"PromptState": "completed", "UserId": "alice", "ConversationId": "conv-7"}
