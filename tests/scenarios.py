"""Deterministic prompt scenarios shared by the history recorder and the replay tests."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall, ToolResultMessage, UserMessage
from durable_agent.agent.models import ReasoningOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import FatalModelError, RetryableModelError
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import Approval, tool


class Amount(BaseModel):
    amount: int


class Words(BaseModel):
    words: str


@tool("demo.echo")
async def echo(args: Words, ctx: ToolContext) -> str:
    """Echo words back, with a widget and a file."""
    ctx.display_widget("echo", {"words": args.words}, fallback_text=args.words)
    ctx.add_file("echo.txt", args.words, summary="the echoed words")
    return args.words


@tool("demo.pay", approval=lambda args: Approval(reason=f"Paying {args.amount} needs approval.") if args.amount > 100
      else None)
async def pay(args: Amount, ctx: ToolContext) -> str:
    """Pay an amount."""
    return f"paid {args.amount}"


@tool("demo.step", local=False)
async def step(args: Words, ctx: ToolContext) -> str:
    """Take a step (always a regular activity: with one call a round, it runs with the next model round)."""
    return f"took {args.words}"


plugin = Plugin("scenarios", tools=[echo, pay, step], instructions="Scenario plugin.")


@tool("demo.remind")
async def remind(args: Words, ctx: ToolContext) -> str:
    """Schedule a prompt in this conversation: `soon` in a second, anything else in an hour; `cancel <id>`."""
    if args.words.startswith("cancel "):
        return ctx.cancel_scheduled_prompt(args.words.removeprefix("cancel ")).id
    return ctx.schedule_prompt(args.words, delay_seconds=1 if args.words == "soon" else 3600,
                               id=f"remind-{args.words}").id


reminders_plugin = Plugin("scenario-reminders", tools=[remind])  # ToolContext.schedule_prompt (conversations)

LARGE_WORDS = "many words " * 150  # above workflows.transcript.OUTPUT_REF_MIN_BYTES

# A sub-agent with the scenario tools: its task's first word selects its script, like a user's input.
helper = SubAgent("helper.ask", description="Hand a task to the helper.", instructions="You are the helper.",
                  plugins=("scenarios",), max_rounds=4)
agents_plugin = Plugin("scenario-agents", tools=[helper.tool()])

# Each scenario: the user's input selects a script; round N answers from the list.
SCRIPTS: dict[str, list[ModelResponse]] = {
    "completed": [tool_calls(("demo.echo", {"words": "hello"})), tool_calls(("demo.pay", {"amount": 5})),
                  text("done")],
    "approval": [tool_calls(("demo.pay", {"amount": 500})), text("after decision")],
    "batch": [tool_calls(("demo.echo", {"words": "a"}), ("demo.pay", {"amount": 300}), ("demo.echo", {"words": "b"})),
              text("batch done")],
    "parallel": [tool_calls(("demo.echo", {"words": "a"}), ("demo.echo", {"words": "b"}),
                            ("demo.echo", {"words": "c"})), text("parallel done")],
    "approvals": [tool_calls(("demo.pay", {"amount": 200}), ("demo.echo", {"words": "x"}),
                             ("demo.pay", {"amount": 300})), text("approvals done")],
    "delegate": [tool_calls(("helper.ask", {"task": "approval through the helper"}), ("demo.echo", {"words": "side"})),
                 text("delegated")],
    "invalid": [tool_calls(("demo.pay", {"amount": "x"}), ("demo.nope", {})), text("fed back")],
    "large": [tool_calls(("demo.echo", {"words": LARGE_WORDS})), text("large done")],  # output by reference
    "forget": [tool_calls(("demo.echo", {"words": LARGE_WORDS})), tool_calls(("demo.echo", {"words": "again"})),
               text("resent")],  # the recorder's worker forgets the transcript in round 2: round 3 is sent whole
    "remind": [tool_calls(("demo.remind", {"words": "soon"}), ("demo.remind", {"words": "later"})),
               text("reminders set")],
    "unremind": [tool_calls(("demo.remind", {"words": "cancel remind-later"})), text("cancelled")],
    "steps": [tool_calls(("demo.step", {"words": "one"})), tool_calls(("demo.step", {"words": "two"}), text="half"),
              text("stepped")],
    # Round 2 fails once (in the activity that ran the step): the workflow calls it as a model round of its own.
    "flaky": [tool_calls(("demo.step", {"words": "once"})), text("after a retry")],
    "reasoning": [ModelResponse(
        reasoning=[ReasoningOutput(provider="anthropic", model="scripted", summary="Pay 5 first.",
                                   item={"type": "thinking", "thinking": "Pay 5 first.", "signature": "sig-1"})],
        tool_calls=[ModelToolCall(id="", tool="demo.pay", arguments={"amount": 5})]), text("paid")],
}


_FLAKED: set[str] = set()  # prompts whose round 2 failed once (`flaky`)


def script(request: ModelRequest) -> ModelResponse:
    users = [m.text for m in request.messages if isinstance(m, UserMessage)]
    # The first input selects the script, but a conversation's `unremind` turn follows its `remind` turn.
    user = users[-1] if users and users[-1] == "unremind" else users[0] if users else ""
    if users and users[-1].startswith("(This prompt was started by the system"):  # a scheduled prompt firing
        return text("the scheduled prompt ran")
    if user == "fail":
        raise FatalModelError("scenario: model refused the request (400)", status=400)
    if user == "flaky" and request.round == 2 and request.prompt_id not in _FLAKED:
        _FLAKED.add(request.prompt_id)
        raise RetryableModelError("scenario: overloaded once (529)", status=529)
    script = SCRIPTS[user.split()[0]]
    if request.round > len(script):
        results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
        return text(" | ".join(results))
    return script[request.round - 1]


model = ScriptedModel(script)


def _unavailable(request: ModelRequest) -> ModelResponse:
    raise FatalModelError("scenario: the first model of the chain is unavailable (401)", status=401)


# The first model of a fallback chain that always fails, so the chain's second model answers.
unavailable = ScriptedModel(_unavailable, model="unavailable")
