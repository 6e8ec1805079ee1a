"""`dagent run`, `watch`, `chat`, `show` and `cancel`: start, follow, read and stop prompts."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli import common
from durable_agent.cli.common import AddressOption, ProfileOption, console, err_console
from durable_agent.cli.errors import REFUSED, report

if TYPE_CHECKING:
    from durable_agent.agent.stops import PromptStop

app = typer.Typer()


@app.command()
def run(
    text: Annotated[str, typer.Argument(help="The user's message")],
    address: AddressOption = None,
    profile: ProfileOption = None,
    user: Annotated[str, typer.Option(help="User id")] = os.environ.get("USER", "anonymous"),
    model: Annotated[str, typer.Option(help="Model tier: normal or high")] = "normal",
    max_rounds: Annotated[int | None, typer.Option(help="Force-complete after this many rounds")] = None,
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Ask for approvals (default: when on a TTY)")] = None,
    priority: Annotated[int | None, typer.Option(help="Task priority, 1 (first) to 5 (last); default 3")] = None,
    fairness_key: Annotated[str | None, typer.Option(help="Fairness key (e.g. a tenant id); default: --user")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Stop after the round that reaches this many tokens")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Stop after the round that reaches this cost")] = None,
) -> None:
    """Start a prompt, stream its outputs, and ask for approvals on a TTY."""
    from rich.text import Text

    from durable_agent.agent.models import TERMINAL_STATES, ModelTier
    from durable_agent.cli import hints
    from durable_agent.cli.follow import follow
    from durable_agent.cli.render import describe_prompt, state_words
    from durable_agent.client import AgentClient
    from durable_agent.client.priority import prompt_priority
    from durable_agent.workflows.protocol import DEFAULT_MAX_ROUNDS, PromptRequest

    settings = common.load_settings(address, profile)
    if model not in ("normal", "high"):
        raise typer.BadParameter("model must be 'normal' or 'high'")
    from durable_agent.workflows.budget.limits import PromptBudget

    try:
        task_priority = prompt_priority(user, priority_key=priority, fairness_key=fairness_key)
        budget = (PromptBudget(max_tokens=max_tokens, max_cost=max_cost)
                  if max_tokens is not None or max_cost is not None else None)
        PromptRequest(input=text, max_rounds=max_rounds or DEFAULT_MAX_ROUNDS)  # refuse bad input before connecting
    except ValueError as exc:  # pydantic's ValidationError included
        common.exit_user_error(exc)
    ask = sys.stdin.isatty() if interactive is None else interactive

    async def main() -> int:
        client = await AgentClient.connect(settings)
        tier: ModelTier = "high" if model == "high" else "normal"
        handle = await client.start(text, user_id=user, model=tier, max_rounds=max_rounds, priority=task_priority,
                                    **({"budget": budget} if budget else {}))
        console.print(f"prompt {handle.id}")
        console.print(f"Temporal UI: {settings.workflow_url(handle.id)}")
        if not await hints.worker_polling(client.client, settings):
            err_console.print(Text.assemble(("warning: ", "yellow"), hints.no_worker(settings)))
        state = await follow(handle, console, interactive=ask, approver=user)
        prompt = await handle.get()
        if state in TERMINAL_STATES:
            console.print(next(line for line in describe_prompt(prompt) if line.startswith("usage")))
        console.print(f"state: {state_words(prompt.state)}")
        return _ended_badly(handle.id, prompt.state, prompt.error, prompt.stop)

    common.run_async(main, settings)


def _ended_badly(prompt_id: str, state: str, error: str | None, stop: PromptStop | None = None) -> int:
    """Exit code of a followed prompt: 1, with one line on stderr, when it failed, was cancelled or stopped
    with its work not done."""
    if state == "stopped":
        why = stop.words().removeprefix("Stopped: ") if stop else "its work is not done"
        report("error", RuntimeError(f"prompt {prompt_id} stopped: {why}"))
        return REFUSED
    if state not in ("failed", "cancelled"):
        return 0
    why = f": {error}" if error else f" (`dagent show {prompt_id}` says why)" if state == "failed" else ""
    report("error", RuntimeError(f"prompt {prompt_id} {'was cancelled' if state == 'cancelled' else 'failed'}{why}"))
    return REFUSED


@app.command()
def watch(
    prompt_id: Annotated[str, typer.Argument(help="Prompt (workflow) id")],
    address: AddressOption = None,
    profile: ProfileOption = None,
    from_offset: Annotated[int, typer.Option("--from", help="Resume from this event sequence number")] = 0,
) -> None:
    """Follow a prompt live: every output, state change and approval request, and streamed model text."""
    from rich.text import Text
    from temporalio.client import WorkflowExecutionStatus

    from durable_agent.cli import hints
    from durable_agent.cli.follow import follow
    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        handle = client.prompt(prompt_id)
        description = await handle.workflow.describe()  # no worker needed: says who and what even without one
        console.print(Text.assemble(("prompt ", "dim"), (prompt_id, "bold"), "  ",
                                    await description.static_summary() or ""))
        console.print(f"Temporal UI: {settings.workflow_url(prompt_id)}")
        queue = settings.model_copy(update={"task_queue": description.task_queue})
        if description.status == WorkflowExecutionStatus.RUNNING and not await hints.worker_polling(client.client,
                                                                                                     queue):
            err_console.print(Text.assemble(("warning: ", "yellow"), hints.no_worker(queue)))
        state = await follow(handle, console, interactive=None, approver="", from_offset=from_offset)
        return _ended_badly(prompt_id, state, None)

    common.run_async(main, settings)


@app.command()
def chat(
    address: AddressOption = None,
    profile: ProfileOption = None,
    user: Annotated[str, typer.Option(help="User id")] = os.environ.get("USER", "anonymous"),
    conversation_id: Annotated[str | None, typer.Option("--conversation", help="Resume this conversation")] = None,
) -> None:
    """An interactive conversation: each line you type is a prompt with the whole conversation as history.
    Approvals are asked inline. Empty line or Ctrl-D ends the session (the conversation stays open)."""
    from durable_agent.cli.answer_line import read_line
    from durable_agent.cli.follow import follow
    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        conversation = await client.start_conversation(user_id=user, conversation_id=conversation_id)
        console.print(f"conversation {conversation.id}  (resume with: dagent chat --conversation {conversation.id})")
        while True:
            console.print("you> ", end="")
            line = await read_line() or ""
            if not line.strip():
                return 0
            prompt = await conversation.send(line, user_id=user)
            await conversation.prompt_started(prompt.id, timeout=300)
            await follow(prompt, console, interactive=True, approver=user)

    common.run_async(main, settings)


@app.command()
def show(
    prompt_id: Annotated[str, typer.Argument(help="Prompt (workflow) id")],
    address: AddressOption = None,
    profile: ProfileOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full record as JSON")] = False,
) -> None:
    """Print a prompt's record."""
    import contextlib

    from temporalio.client import WorkflowExecutionStatus

    from durable_agent.cli import hints
    from durable_agent.cli.render import describe_prompt
    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        handle = client.prompt(prompt_id)
        problem = await handle.task_problem()
        if problem is not None:
            err_console.print(f"prompt {prompt_id} is stuck: its workflow task failed {problem.attempt} times: "
                              f"{problem.reason}", markup=False)
            return 1
        description = await handle.workflow.describe()
        queue = settings.model_copy(update={"task_queue": description.task_queue})
        if description.status == WorkflowExecutionStatus.RUNNING \
                and not await hints.worker_polling(client.client, queue):
            err_console.print(f"error: prompt {prompt_id} cannot be read: its record is asked of a worker, and "
                              f"{hints.no_worker(queue)}", markup=False)
            return 1
        prompt = None
        if description.status != WorkflowExecutionStatus.RUNNING:  # its result is the record: no worker needed
            with contextlib.suppress(Exception):
                prompt = await handle.result()
        prompt = prompt or await handle.get()
        if as_json:
            console.print_json(prompt.model_dump_json())
        else:
            for line in describe_prompt(prompt):
                console.print(line)
            console.print(f"Temporal UI: {settings.workflow_url(prompt_id)}")
        return 0

    common.run_async(main, settings)


@app.command()
def cancel(prompt_id: str, address: AddressOption = None, profile: ProfileOption = None) -> None:
    """Cancel a prompt: it ends as `cancelled` and keeps its outputs."""
    from durable_agent.client import AgentClient

    settings = common.load_settings(address, profile)

    async def main() -> int:
        await (await AgentClient.connect(settings)).prompt(prompt_id).cancel()
        console.print(f"cancellation requested for {prompt_id}")
        return 0

    common.run_async(main, settings)
