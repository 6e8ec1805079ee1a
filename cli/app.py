"""`dagent`: the command line of Durable Agent (server, worker, run, approvals, inspection, quick start)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text
from temporalio.client import WorkflowExecutionStatus

from durable_agent.agent.extras import MissingExtra, explain_missing, require
from durable_agent.agent.identity import Identity, person_id, person_problem
from durable_agent.agent.logging import configure_logging
from durable_agent.agent.models import TERMINAL_STATES, ModelTier, ToolOutput
from durable_agent.cli import api_decisions, decisions, hints
from durable_agent.cli.errors import REFUSED, USER_ERROR, report
from durable_agent.cli.follow import STATE_STYLES, discard_at_exit, follow, read_line
from durable_agent.cli.ls import STATES, age, recent_prompts
from durable_agent.cli.render import describe_output, describe_prompt
from durable_agent.cli.ui_links import UI_URL_ENV, forget_server, remember_server, with_ui_url
from durable_agent.client import AgentClient, DecisionRefused, PromptHandle
from durable_agent.client.pending import may_see
from durable_agent.workers.settings import Settings
from durable_agent.workflows.protocol import DEFAULT_MAX_ROUNDS, PromptRequest

app = typer.Typer(help="Durable Agent: LLM agents that never lose their place.", no_args_is_help=True,
                  add_completion=False)
console = Console(highlight=False, soft_wrap=True, markup=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

DEMO_INPUT = "Plan my Paris trip: check the weather, write me a short report and pay the $250 hotel deposit."


def _exit(code: int = 0) -> NoReturn:
    """Leave without running interpreter teardown: the Temporal SDK can crash there (sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    discard_at_exit()
    os._exit(code)


class _Explained(Exception):
    """An error already turned into one line with a hint."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


async def _explained(main: Callable[[], Awaitable[int | None]], settings: Settings | None) -> int | None:
    """Run `main`; the common mistakes (no server, a mistyped prompt id) become one line with a hint."""
    try:
        return await main()
    except Exception as exc:
        if settings is None:
            raise
        if hints.is_connect_failure(exc):
            raise _Explained(hints.no_server(settings), REFUSED) from None
        if (prompt_id := hints.missing_prompt_id(exc)) is not None:
            try:
                client = (await AgentClient.connect(settings)).client
            except RuntimeError:
                client = None
            raise _Explained(await hints.unknown_prompt(client, prompt_id), USER_ERROR) from None
        raise


def _run_async(main: Callable[[], Awaitable[int | None]], settings: Settings | None = None) -> None:
    try:
        code = asyncio.run(_explained(main, settings))
    except KeyboardInterrupt:
        code = 130
    except _Explained as exc:
        report("error", exc)
        code = exc.code
    except DecisionRefused as exc:
        report("refused", exc)
        code = REFUSED
    except (ValueError, LookupError, FileNotFoundError, MissingExtra) as exc:
        report("error", exc)
        code = USER_ERROR
    except ModuleNotFoundError as exc:  # an optional package imported outside extras.import_extra
        report("error", explain_missing(exc, "this command"))
        code = USER_ERROR
    except Exception as exc:  # connection failures, RPC errors: still one line, never a traceback
        report("error", exc)
        code = REFUSED
    _exit(code or 0)


def main() -> None:
    """The `dagent` entry point: usage errors are one line on stderr too (exit code 2)."""
    if len(sys.argv) <= 1:
        app()  # no arguments: typer prints the help
    try:
        app(standalone_mode=False)
    except typer.Abort:
        _exit(130)
    except (typer.TyperException, MissingExtra) as exc:
        report("error", exc)
        _exit(USER_ERROR)
    except ModuleNotFoundError as exc:  # an optional package imported outside extras.import_extra
        report("error", explain_missing(exc, "this command"))
        _exit(USER_ERROR)
    except Exception as exc:
        report("error", exc)
        _exit(REFUSED)
    _exit(0)


def _settings(address: str | None, profile: str | None = None) -> Settings:
    try:
        settings = Settings.from_env(profile=profile)
    except ValueError as exc:
        report("error", exc)
        _exit(USER_ERROR)
    if address:
        settings = settings.model_copy(update={"temporal_address": address})
    configure_logging(settings.log_level)
    return with_ui_url(settings)  # links to the UI the server really has


AddressOption = Annotated[str | None, typer.Option("--address", help="Temporal frontend (default: $TEMPORAL_ADDRESS)")]
ProfileOption = Annotated[str | None, typer.Option(
    "--profile", help="Connection profile from the Temporal config file (default: $TEMPORAL_PROFILE)")]


# --- server and worker ----------------------------------------------------------------------------


@app.command()
def server(
    port: Annotated[int, typer.Option(help="gRPC port")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port")] = 8233,
    db_file: Annotated[Path, typer.Option(help="SQLite file: state survives restarts")] = Path(".dagent/temporal.db"),
) -> None:
    """Run the embedded Temporal dev server (with UI and persistent storage) until Ctrl-C (`server` extra)."""
    from durable_agent.cli.devserver import DevServer
    from durable_agent.cli.devserver.binaries import temporal_cli_path

    temporal_cli_path()  # MissingExtra: one line naming the `server` extra
    _port_free("127.0.0.1", port, "--port")
    _port_free("127.0.0.1", ui_port, "--ui-port")
    dev = DevServer(port=port, ui_port=ui_port, db_file=db_file)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # so sigwait receives them
    dev.start()
    remember_server(dev.address, dev.ui_url, dev.pid)  # `dagent` on this machine links to this UI
    console.print(f"Temporal dev server on {dev.address}  UI: {dev.ui_url}  db: {dev.db_file}")
    console.print(f"Log: {dev.log_file}. Ctrl-C stops it.")
    if ui_port != 8233:
        console.print(f"`dagent` on this machine links to this UI by itself; elsewhere set {UI_URL_ENV}={dev.ui_url}")
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    forget_server(dev.address, dev.pid)
    dev.stop()
    _exit(0)


@app.command()
def worker(
    address: AddressOption = None,
    profile: ProfileOption = None,
    plugin: Annotated[list[str] | None, typer.Option(help="Plugin import path module:attr (repeatable)")] = None,
    model_normal: Annotated[str | None, typer.Option(help="provider:model for the normal tier")] = None,
    model_high: Annotated[str | None, typer.Option(help="provider:model for the high tier")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve Prometheus metrics on this port at /metrics (default: $DAGENT_METRICS_PORT)")] = None,
    ready_file: Annotated[Path | None, typer.Option(envvar="DAGENT_READY_FILE", help="Write this file while the "
                                                    "server sees the worker poll (`dagent worker-ready`)")] = None,
) -> None:
    """Run a worker: PromptWorkflow plus the model and tool activities, until Ctrl-C or SIGTERM."""
    settings = _settings(address, profile)
    update = {"plugins": tuple(plugin or ()), "model_normal": model_normal, "model_high": model_high}
    update = {name: value for name, value in update.items() if value}
    settings = settings.model_copy(update=update | ({} if metrics_port is None else {"metrics_port": metrics_port}))

    async def main() -> int:
        from contextlib import AsyncExitStack

        from durable_agent.workers.connection import describe_security
        from durable_agent.workers.observability import flush_traces
        from durable_agent.workers.readiness import serve_readiness
        from durable_agent.workers.storage.stores import check_store
        from durable_agent.workers.worker import build_runtime, connect, create_workers

        await check_store(settings.blob_objects())  # refuse to start without a usable store
        runtime = build_runtime(settings)
        from durable_agent.workers.drain import StopSignals, drain
        from durable_agent.workers.durations import format_duration

        client = await connect(settings, metrics=True)
        stop = StopSignals(on_force=lambda: err_console.print("second signal: stopping now"))
        try:
            async with AsyncExitStack() as workers:
                running = create_workers(client, runtime, settings)
                for one in running:
                    await workers.enter_async_context(one)
                await workers.enter_async_context(serve_readiness(
                    client, running, ready_file, address=settings.temporal_address,
                    workflow_queue=settings.task_queue, stopping=stop.stopping))
                queues = [settings.task_queue] if settings.worker_queues != "models" else []
                queues += settings.model_queues if settings.worker_queues != "workflows" else []
                err_console.print(f"worker on {settings.temporal_address} "
                                  f"({describe_security(settings.temporal_profile)}) "
                                  f"queues={','.join(queues)} store={settings.blob_objects().location} "
                                  f"codec={'on' if settings.codec_keys else 'off'} "
                                  f"plugins={','.join(settings.plugins)} models={settings.model_tiers}")
                if settings.metrics_port is not None:
                    err_console.print(f"metrics on http://{settings.observability().metrics_bind}/metrics")
                await stop.wait()
                err_console.print(f"draining: running tools and model calls have up to "
                                  f"{format_duration(settings.graceful_shutdown)} to finish (signal again to stop now)")
                await drain(running, settings.graceful_shutdown)
        finally:
            await runtime.mcp.aclose()  # stops the stdio MCP servers this worker started
            flush_traces()
        return 0

    _run_async(main, settings)


# --- prompts ----------------------------------------------------------------------------------------


async def _follow(handle: PromptHandle, *, interactive: bool | None, approver: str, from_offset: int = 0) -> str:
    return await follow(handle, console, interactive=interactive, approver=approver, from_offset=from_offset)


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
    from durable_agent.client.priority import prompt_priority

    settings = _settings(address, profile)
    if model not in ("normal", "high"):
        raise typer.BadParameter("model must be 'normal' or 'high'")
    from durable_agent.workflows.budgets import PromptBudget

    try:
        task_priority = prompt_priority(user, priority_key=priority, fairness_key=fairness_key)
        budget = (PromptBudget(max_tokens=max_tokens, max_cost=max_cost)
                  if max_tokens is not None or max_cost is not None else None)
    except ValueError as exc:
        report("error", exc)
        _exit(USER_ERROR)
    ask = sys.stdin.isatty() if interactive is None else interactive
    try:
        PromptRequest(input=text, max_rounds=max_rounds or DEFAULT_MAX_ROUNDS)  # refuse bad input before connecting
    except ValidationError as exc:
        report("error", exc)
        _exit(USER_ERROR)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        tier: ModelTier = "high" if model == "high" else "normal"
        handle = await client.start(text, user_id=user, model=tier, max_rounds=max_rounds, priority=task_priority,
                                    **({"budget": budget} if budget else {}))
        console.print(f"prompt {handle.id}")
        console.print(f"Temporal UI: {settings.workflow_url(handle.id)}")
        if not await hints.worker_polling(client.client, settings):
            err_console.print(Text.assemble(("warning: ", "yellow"), hints.no_worker(settings)))
        state = await _follow(handle, interactive=ask, approver=user)
        prompt = await handle.get()
        if state in TERMINAL_STATES:
            console.print(next(line for line in describe_prompt(prompt) if line.startswith("usage")))
        console.print(f"state: {prompt.state}")
        return _ended_badly(handle.id, prompt.state, prompt.error)

    _run_async(main, settings)


def _ended_badly(prompt_id: str, state: str, error: str | None) -> int:
    """Exit code of a followed prompt: 1, with one line on stderr, when it failed or was cancelled."""
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
    settings = _settings(address, profile)

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
        state = await _follow(handle, interactive=None, approver="", from_offset=from_offset)
        return _ended_badly(prompt_id, state, None)

    _run_async(main, settings)


@app.command()
def chat(
    address: AddressOption = None,
    profile: ProfileOption = None,
    user: Annotated[str, typer.Option(help="User id")] = os.environ.get("USER", "anonymous"),
    conversation_id: Annotated[str | None, typer.Option("--conversation", help="Resume this conversation")] = None,
) -> None:
    """An interactive conversation: each line you type is a prompt with the whole conversation as history.
    Approvals are asked inline. Empty line or Ctrl-D ends the session (the conversation stays open)."""
    settings = _settings(address, profile)

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
            await _follow(prompt, interactive=True, approver=user)

    _run_async(main, settings)


@app.command()
def show(
    prompt_id: Annotated[str, typer.Argument(help="Prompt (workflow) id")],
    address: AddressOption = None,
    profile: ProfileOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full record as JSON")] = False,
) -> None:
    """Print a prompt's record."""
    settings = _settings(address, profile)

    async def main() -> int:
        handle = (await AgentClient.connect(settings)).prompt(prompt_id)
        problem = await handle.task_problem()
        if problem is not None:
            err_console.print(f"prompt {prompt_id} is stuck: its workflow task failed {problem.attempt} times: "
                              f"{problem.reason}", markup=False)
            return 1
        prompt = await handle.get()
        if as_json:
            console.print_json(prompt.model_dump_json())
        else:
            for line in describe_prompt(prompt):
                console.print(line)
            console.print(f"Temporal UI: {settings.workflow_url(prompt_id)}")
        return 0

    _run_async(main, settings)


def _one_or_all(tool_call_id: str | None, every: bool) -> None:
    if (tool_call_id is None) == (not every):
        raise typer.BadParameter("give a TOOL_CALL_ID or --all (not both)")


async def _decide(client: AgentClient, prompt_id: str, tool_call_id: str | None, how: decisions.Decide,
                  verb: str) -> list[ToolOutput | None]:
    """Decide one call (or, without an id, every call pending now, in record order) and print each decision as
    it is taken: the call's result, or, when its batch still waits, the decision and how many others it waits
    for. A sub-agent's call (`<call>/<call>`) is followed to the prompt that runs it. With several calls, the
    ones that waited are followed until they ran (or `decisions.ONCE_RUN_SECONDS`), and printed again."""
    handle = client.prompt(prompt_id)
    call_ids = [tool_call_id] if tool_call_id else [p.tool_call_id for p in await handle.pending_approvals()]
    if not call_ids:
        raise DecisionRefused(f"prompt {prompt_id} has no call waiting for approval")
    outcomes: list[ToolOutput | None] = []
    for call_id in call_ids:
        resolved = await decisions.decide(client, prompt_id, call_id, how)
        if resolved is not None and decisions.is_waiting_for_batch(resolved):
            console.print(decisions.taken_line(resolved, await decisions.waiting_count(handle, call_id)))
        else:
            console.print(describe_output(resolved) if resolved else verb)
        outcomes.append(resolved)
    if len(call_ids) > 1 and any(decisions.is_waiting_for_batch(o) for o in outcomes):
        ended = await decisions.once_run(handle, outcomes)
        for before, after in zip(outcomes, ended, strict=True):
            if decisions.is_waiting_for_batch(before) and after is not None:
                console.print(describe_output(after))
        outcomes = ended
    return outcomes


RoleOption = Annotated[list[str] | None, typer.Option(
    "--role", help="A role you hold, for calls whose approvers name `role:...` (repeatable; counted only "
    "without decision keys, like --by)")]


def _decider(by: str) -> str:
    """The person `--by` names: `user:alice` is `alice`; a role is refused (a decision records a person)."""
    problem = person_problem(by)
    if problem is not None:
        raise typer.BadParameter(f"--by {problem}; hold the role with --role", param_hint="--by")
    return person_id(by) or by


def _failed_after_approval(outcomes: list[ToolOutput | None]) -> int:
    """Exit code of `approve`: 0 once every decision was taken (a call still waiting for the rest of its batch
    included); 1, with one line on stderr, when an approved call ran and failed."""
    failed = [o for o in outcomes if o is not None and o.result is not None and o.result.type == "error"]
    if not failed:
        return 0
    first = failed[0]
    error = first.result.error if first.result is not None and first.result.type == "error" else ""
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    err_console.print(f"error: {first.tool} [{first.id}] was approved but failed: {error}{more}", markup=False)
    return REFUSED


@app.command()
def approve(
    prompt_id: str,
    tool_call_id: Annotated[str | None, typer.Argument(help="The pending call; omit with --all")] = None,
    address: AddressOption = None,
    profile: ProfileOption = None,
    by: Annotated[str, typer.Option(help="Your user id (a person, `alice` or `user:alice`; never a role)")] = (
        os.environ.get("USER", "cli")),
    role: RoleOption = None,
    input: Annotated[str | None, typer.Option("--input", help="Corrected arguments as a JSON object")] = None,
    every: Annotated[bool, typer.Option("--all", help="Approve every pending call of the prompt")] = False,
) -> None:
    """Approve a pending tool call (or --all of them); waits for and prints the result."""
    settings = _settings(address, profile)
    _one_or_all(tool_call_id, every)
    by = _decider(by)
    try:
        corrected = json.loads(input) if input else None
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"--input is not valid JSON: {exc}") from exc
    if corrected is not None and not isinstance(corrected, dict):
        raise typer.BadParameter("--input must be a JSON object")
    if corrected is not None and every:
        raise typer.BadParameter("--input corrects one call; it cannot be used with --all")

    async def approve_one(handle: PromptHandle, call_id: str) -> ToolOutput | None:
        return await api_decisions.approve(handle, call_id, by=by, input=corrected, roles=role or ())

    async def main() -> int:
        client = await AgentClient.connect(settings)
        return _failed_after_approval(await _decide(client, prompt_id, tool_call_id, approve_one, "approved"))

    _run_async(main, settings)


@app.command()
def reject(
    prompt_id: str,
    tool_call_id: Annotated[str | None, typer.Argument(help="The pending call; omit with --all")] = None,
    address: AddressOption = None,
    profile: ProfileOption = None,
    by: Annotated[str, typer.Option(help="Your user id (a person, `alice` or `user:alice`; never a role)")] = (
        os.environ.get("USER", "cli")),
    role: RoleOption = None,
    reason: Annotated[str | None, typer.Option(help="Why; the model sees it")] = None,
    every: Annotated[bool, typer.Option("--all", help="Reject every pending call of the prompt")] = False,
) -> None:
    """Reject a pending tool call (or --all of them); the model sees the rejection and its reason."""
    settings = _settings(address, profile)
    _one_or_all(tool_call_id, every)
    by = _decider(by)

    async def reject_one(handle: PromptHandle, call_id: str) -> ToolOutput | None:
        return await api_decisions.reject(handle, call_id, by=by, reason=reason, roles=role or ())

    async def main() -> int:
        await _decide(await AgentClient.connect(settings), prompt_id, tool_call_id, reject_one, "rejected")
        return 0

    _run_async(main, settings)


@app.command()
def pending(
    address: AddressOption = None,
    profile: ProfileOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's prompts")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the calls as one JSON document")] = False,
    as_person: Annotated[str | None, typer.Option(
        "--as", help="Only the calls this person sees: their own prompts' and those whose approvers name them "
        "or one of their --role")] = None,
    role: RoleOption = None,
) -> None:
    """List every call waiting for approval, addressed from its top prompt (a sub-agent's as <call>/<call>)."""
    settings = _settings(address, profile)
    who = Identity.of(_decider(as_person), role or ()) if as_person else None

    async def main() -> int:
        found = await (await AgentClient.connect(settings)).pending(user_id=user)
        if who is not None:
            found.rows = [row for row in found.rows if may_see(row, who)]
        for prompt_id in found.unanswered:
            err_console.print(f"warning: prompt {prompt_id} is waiting but did not answer (is a worker running "
                              "for its task queue?); its calls are not listed")
        rows = found.rows
        if as_json:  # plain JSON: rich's print_json takes seconds per thousand rows
            sys.stdout.write(json.dumps([row.model_dump(mode="json") for row in rows], indent=2) + "\n")
            return 0
        if not rows:
            console.print("no prompt is waiting for approval")
        lines = []
        for row in rows:
            call = row.call
            path = f"  path={' -> '.join([row.prompt_id, *call.path])}" if call.path else ""  # a sub-agent's call
            lines.append(f"{row.prompt_id}  user={row.user_id}  {call.tool_call_id}  {call.tool} "
                         f"{json.dumps(call.input)}  — {call.reason}{path}")
        if lines:  # one print: rich's per-call cost adds up over thousands of rows
            console.print("\n".join(lines))
        return 0

    _run_async(main, settings)


@app.command("ls")
def list_prompts(
    address: AddressOption = None,
    profile: ProfileOption = None,
    state: Annotated[str | None, typer.Option(help=f"Only prompts in this state: {', '.join(STATES)}")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's prompts")] = None,
    limit: Annotated[int, typer.Option(help="At most this many")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as one JSON document")] = False,
) -> None:
    """List recent prompts: state, user, age and summary, those waiting for approval first."""
    settings = _settings(address, profile)
    if state is not None and state not in STATES:
        raise typer.BadParameter(f"state must be one of {', '.join(STATES)}")

    async def main() -> int:
        client = await AgentClient.connect(settings)
        rows = await recent_prompts(client.client, state=state, user=user, limit=limit)
        if as_json:
            console.print_json(json.dumps([row.model_dump(mode="json") for row in rows]))
            return 0
        if not rows:
            console.print("no prompts" + (" in that state" if state else "") + (f" of {user}" if user else ""))
        for row in rows:
            style = STATE_STYLES.get(row.state, "")
            console.print(Text.assemble((f"{row.id:<26} ", "bold"), (f"{row.state:<21} ", style),
                                        f"{(row.user or '-'):<12} ", (f"{age(row.started_at):>4}  ", "dim"),
                                        row.summary))
        return 0

    _run_async(main, settings)


@app.command()
def stuck(address: AddressOption = None, profile: ProfileOption = None,
          as_json: Annotated[bool, typer.Option("--json", help="Print them as one JSON document")] = False) -> None:
    """List prompts and conversations whose workflow task keeps failing, with the reason (exit 1 if any)."""
    settings = _settings(address, profile)

    async def main() -> int:
        problems = await (await AgentClient.connect(settings)).stuck()
        if as_json:
            console.print_json(json.dumps([dataclasses.asdict(problem) for problem in problems]))
        elif not problems:
            console.print("no prompt or conversation is stuck")
        for problem in [] if as_json else problems:
            console.print(f"{problem.workflow_id}  {problem.workflow_type}  attempt {problem.attempt}: "
                          f"{problem.reason}")
        return 1 if problems else 0

    _run_async(main, settings)


@app.command()
def cancel(prompt_id: str, address: AddressOption = None, profile: ProfileOption = None) -> None:
    """Cancel a prompt: it ends as `cancelled` and keeps its outputs."""
    settings = _settings(address, profile)

    async def main() -> int:
        await (await AgentClient.connect(settings)).prompt(prompt_id).cancel()
        console.print(f"cancellation requested for {prompt_id}")
        return 0

    _run_async(main, settings)


# --- deployment: codec server, blob store ---------------------------------------------------------


@app.command("codec-server")
def codec_server(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 8081,
    cors_origin: Annotated[list[str] | None, typer.Option(
        help="Origin of the Temporal UI allowed to call it (repeatable; default: $DAGENT_UI_URL)")] = None,
) -> None:
    """Serve the payload codec over HTTP (/encode, /decode) for the Temporal UI and CLI.

    Keys from DAGENT_CODEC_KEYS; every request must carry `Authorization: Bearer $DAGENT_CODEC_AUTH_TOKEN`
    when that variable is set."""
    from durable_agent.workers.storage.codec_server import serve

    settings = _settings(None)
    origins = list(cors_origin or settings.codec_cors_origins or [settings.ui_url])
    token = settings.codec_auth_token.get_secret_value() if settings.codec_auth_token else None

    async def main() -> int:
        codec = settings.codec()
        if codec is None:
            raise ValueError("DAGENT_CODEC_KEYS is not set: there is nothing to decode with")
        runner = await serve(codec, host=host, port=port, origins=origins, auth_token=token)
        err_console.print(f"codec server on http://{host}:{port} keys={','.join(codec.key_ids)} "
                          f"active={codec.active_key_id} cors={','.join(origins)} auth={'on' if token else 'off'}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
        return 0

    _run_async(main)


store_app = typer.Typer(help="The blob store of payloads and files (DAGENT_STORE).", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("check")
def store_check() -> None:
    """Write and read back a probe object: exit 0 when the configured store is usable."""
    from durable_agent.workers.storage.stores import check_store

    settings = _settings(None)

    async def main() -> int:
        await check_store(settings.blob_objects())
        console.print(f"store ok: {settings.blob_objects().location}")
        return 0

    _run_async(main)


@store_app.command("sweep")
def store_sweep(
    address: AddressOption = None,
    profile: ProfileOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed")] = False,
    grace_minutes: Annotated[int, typer.Option(help="Never remove blobs written this recently")] = 60,
) -> None:
    """Remove local-directory blobs of workflows past the namespace's retention (S3/GCS: use a lifecycle
    rule, see docs/deploying.md)."""
    from datetime import timedelta

    from durable_agent.workers.retention import sweep_directory
    from durable_agent.workers.storage.local import DirectoryObjects
    from durable_agent.workers.worker import connect

    settings = _settings(address, profile)

    async def main() -> int:
        if not isinstance(settings.blob_objects(), DirectoryObjects):
            raise ValueError(f"{settings.blob_objects().location} is swept by its lifecycle rule, not by dagent "
                             "(docs/deploying.md, Retention)")
        client = await connect(settings)
        roots = [Path(settings.payload_dir), Path(settings.file_dir)]
        report = await sweep_directory(client, roots, grace=timedelta(minutes=grace_minutes), dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        for label in report.removed:
            console.print(f"{verb} {label}")
        console.print(f"{verb} blobs of {len(report.removed)} workflow run(s), {report.bytes_removed} bytes; "
                      f"kept {len(report.kept)}; namespace retention {report.retention}")
        return 0

    _run_async(main)


@store_app.command("refresh")
def store_refresh(
    address: AddressOption = None,
    profile: ProfileOption = None,
    older_than: Annotated[str, typer.Option(help="Re-write referenced objects older than this (e.g. 7d)")] = "7d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would be re-written")] = False,
) -> None:
    """Keep every object an open workflow references younger than the store's age rule (run it daily; see
    docs/operations.md, Retention)."""
    from durable_agent.workers.durations import parse_duration
    from durable_agent.workers.retention import refresh_live_blobs
    from durable_agent.workers.worker import connect

    settings = _settings(address, profile)
    try:
        age = parse_duration(older_than, what="--older-than")
    except ValueError as exc:
        report("error", exc)
        _exit(USER_ERROR)

    async def main() -> int:
        stores = {o.location: o for o in (settings.blob_objects(), settings.file_store().objects)}
        done = await refresh_live_blobs(await connect(settings), list(stores.values()), older_than=age,
                                        dry_run=dry_run)
        console.print(f"{'would re-write' if dry_run else 're-wrote'} {len(done.refreshed)} of {done.referenced} "
                      f"objects referenced by {done.workflows} open workflow(s); {len(done.missing)} missing")
        for key in done.missing:
            console.print(f"missing {key}")
        return 1 if done.missing else 0

    _run_async(main, settings)


@app.command()
def api(
    address: AddressOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8000,
    config: Annotated[Path | None, typer.Option(help="API config (TOML): API keys, OIDC, limits; "
                                                     "default $DAGENT_API_CONFIG")] = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), live events (SSE, AG-UI) and the inbox and chat pages (`api` extra)."""
    require("api", "dagent api")
    import uvicorn

    from durable_agent.api import create_app
    from durable_agent.api.config import ApiConfig

    settings = _settings(address)
    app_ = create_app(config=ApiConfig.load(config), settings=settings)
    _can_serve(settings, host, port)
    err_console.print(f"API on http://{host}:{port}  (docs /docs, inbox /inbox, chat /chat) "
                      f"Temporal {settings.temporal_address}")
    uvicorn.run(app_, host=host, port=port, log_level=settings.log_level.lower(), proxy_headers=True)
    _exit(0)


def _port_free(host: str, port: int, option: str) -> None:
    """Exit with one line when `host:port` cannot be listened on (taken, or not allowed)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            report("error", OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc} — choose another "
                                    f"{option}"))
            _exit(REFUSED)


def _can_serve(settings: Settings, host: str, port: int) -> None:
    """Before the web server starts: the port is free and Temporal answers; if not, one line and exit 1 (the
    server's own startup failure is a traceback)."""
    _port_free(host, port, "--port")

    async def reachable() -> None:
        await AgentClient.connect(settings)

    try:
        asyncio.run(_explained(reachable, settings))
    except _Explained as exc:
        report("error", exc)
        _exit(exc.code)
    except Exception as exc:
        report("error", exc)
        _exit(REFUSED)


@app.command()
def demo(
    db_file: Annotated[Path, typer.Option(help="SQLite file of the embedded server")] = Path(".dagent/demo.db"),
    port: Annotated[int, typer.Option(help="gRPC port (a free one if taken)")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port (a free one if taken)")] = 8233,
    keep: Annotated[bool, typer.Option(help="Keep the server running afterwards to browse the UI")] = False,
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Ask for the approval (default: when on a TTY)")] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Print the prompt's OpenTelemetry span tree")] = False,
) -> None:
    """The quick start: embedded dev server + worker + a prompt that needs an approval (`server` extra)."""
    from durable_agent.cli.demo import run_demo
    from durable_agent.cli.devserver.binaries import temporal_cli_path

    temporal_cli_path()  # MissingExtra: one line naming the `server` extra
    if trace:
        require("otel", "dagent demo --trace")

    configure_logging(os.environ.get("DAGENT_LOG_LEVEL", "WARNING"))
    ask = sys.stdin.isatty() if interactive is None else interactive
    _run_async(lambda: run_demo(db_file=db_file, keep=keep, interactive=ask, console=console,
                                input_text=DEMO_INPUT, port=port, ui_port=ui_port, trace=trace))


if __name__ == "__main__":
    main()


from durable_agent.cli.deploy import deploy_app  # noqa: E402  (after the helpers it uses)

app.add_typer(deploy_app, name="deploy")

from durable_agent.cli.schedule import schedule_app  # noqa: E402

app.add_typer(schedule_app, name="schedule")

app.add_typer(__import__("durable_agent.cli.budget", fromlist=["budget_app"]).budget_app, name="budget")
app.command("worker-ready")(__import__("durable_agent.cli.worker_ready", fromlist=["worker_ready"]).worker_ready)
