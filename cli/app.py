"""`dagent`: the command line of Durable Agent (server, worker, run, approvals, inspection, quick start)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agent.logging import configure_logging
from agent.models import TERMINAL_STATES, ModelTier, ToolOutput
from cli.render import describe_output, describe_prompt
from client import AgentClient, DecisionRefused, PromptHandle
from workers.settings import Settings
from workflows.protocol import StreamEvent, TextDelta

app = typer.Typer(help="Durable Agent: LLM agents that never lose their place.", no_args_is_help=True,
                  add_completion=False)
console = Console(highlight=False, soft_wrap=True, markup=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

DEMO_INPUT = "Plan my Paris trip: check the weather, write me a short report and pay the $250 hotel deposit."


def _exit(code: int = 0) -> None:
    """Leave without running interpreter teardown: the Temporal SDK can crash there (sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_async(main: Callable[[], Awaitable[int | None]]) -> None:
    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 130
    except DecisionRefused as exc:
        err_console.print(f"[red]refused:[/red] {exc}")
        code = 1
    except (ValueError, LookupError, FileNotFoundError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        code = 2
    except RuntimeError as exc:
        causes = []
        cause = exc.__cause__
        while cause is not None and len(causes) < 5:
            causes.append(f"{type(cause).__name__}: {cause}")
            cause = cause.__cause__
        err_console.print(f"[red]error:[/red] {exc}" + "".join(f"\n  caused by {c}" for c in causes))
        code = 1
    _exit(code or 0)


def _settings(address: str | None) -> Settings:
    settings = Settings.from_env()
    if address:
        settings = settings.model_copy(update={"temporal_address": address})
    configure_logging(settings.log_level)
    return settings


AddressOption = Annotated[str | None, typer.Option("--address", help="Temporal frontend (default: $TEMPORAL_ADDRESS)")]


# --- server and worker ----------------------------------------------------------------------------


@app.command()
def server(
    port: Annotated[int, typer.Option(help="gRPC port")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port")] = 8233,
    db_file: Annotated[Path, typer.Option(help="SQLite file: state survives restarts")] = Path(".dagent/temporal.db"),
) -> None:
    """Run the embedded Temporal dev server (with UI and persistent storage) until Ctrl-C."""
    from workers.devserver import DevServer

    dev = DevServer(port=port, ui_port=ui_port, db_file=db_file)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # so sigwait receives them
    dev.start()
    console.print(f"Temporal dev server on {dev.address}  UI: {dev.ui_url}  db: {dev.db_file}")
    console.print(f"Log: {dev.log_file}. Ctrl-C stops it.")
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    dev.stop()
    _exit(0)


@app.command()
def worker(
    address: AddressOption = None,
    plugin: Annotated[list[str] | None, typer.Option(help="Plugin import path module:attr (repeatable)")] = None,
    model_normal: Annotated[str | None, typer.Option(help="provider:model for the normal tier")] = None,
    model_high: Annotated[str | None, typer.Option(help="provider:model for the high tier")] = None,
) -> None:
    """Run a worker: PromptWorkflow plus the model and tool activities, until Ctrl-C or SIGTERM."""
    settings = _settings(address)
    update: dict[str, Any] = {}
    if plugin:
        update["plugins"] = tuple(plugin)
    if model_normal:
        update["model_normal"] = model_normal
    if model_high:
        update["model_high"] = model_high
    settings = settings.model_copy(update=update)

    async def main() -> int:
        from workers.worker import build_runtime, connect, create_worker

        runtime = build_runtime(settings)
        client = await connect(settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with create_worker(client, runtime, task_queue=settings.task_queue):
            err_console.print(f"worker on {settings.temporal_address} queue={settings.task_queue} "
                              f"plugins={','.join(settings.plugins)} models={settings.model_tiers}")
            await stop.wait()
        return 0

    _run_async(main)


# --- prompts ----------------------------------------------------------------------------------------


async def _ask(question: str) -> bool:
    return await asyncio.to_thread(typer.confirm, question, default=False)


class _Printer:
    """Prints a prompt's live events; streamed text deltas appear as they arrive."""

    def __init__(self) -> None:
        self.shown: dict[int, int] = {}  # round -> characters of streamed text already printed
        self.streaming = False

    def delta(self, delta: TextDelta) -> None:
        already = self.shown.get(delta.round, 0)
        fresh = delta.text[max(already - delta.offset, 0):] if delta.offset + len(delta.text) > already else ""
        if fresh:
            if not self.streaming:
                console.print("…       ", end="")
            console.print(fresh, end="")
            self.streaming = True
            self.shown[delta.round] = delta.offset + len(delta.text)

    def event(self, event: StreamEvent) -> None:
        if self.streaming:
            console.print()
            self.streaming = False
        if event.kind == "state_changed":
            console.print(f"state   {event.state}")
        elif event.output is not None and event.kind != "approval_requested":
            console.print(f"[{event.index}] {describe_output(event.output)}")


async def _follow(handle: PromptHandle, *, interactive: bool | None, approver: str, from_offset: int = 0) -> str:
    """Print the prompt's events as they happen. On an approval request: ask (interactive), print how to
    decide and return (False), or just keep watching (None)."""
    printer = _Printer()
    async for _, item in handle.live(from_offset):
        if isinstance(item, TextDelta):
            printer.delta(item)
            continue
        printer.event(item)
        entry = item.output
        if item.kind != "approval_requested" or not isinstance(entry, ToolOutput):
            continue
        if interactive:
            if await _ask(f"Approve {entry.tool} {json.dumps(entry.input)}?"):
                await handle.approve(entry.id, by=approver)
            else:
                await handle.reject(entry.id, by=approver, reason="rejected at the terminal")
        elif interactive is False:
            _print_decision_commands(handle.id, entry.id)
            return "waiting_for_approval"
    return (await handle.get()).state


def _print_decision_commands(prompt_id: str, call_id: str) -> None:
    console.print("The prompt is waiting for approval. Decide with one of:")
    console.print(f"  dagent approve {prompt_id} {call_id}")
    console.print(f"  dagent reject {prompt_id} {call_id} --reason 'not now'")
    console.print(f"  temporal workflow signal -w {prompt_id} --name approve "
                  f"--input '{{\"tool_call_id\": \"{call_id}\"}}'")


@app.command()
def run(
    text: Annotated[str, typer.Argument(help="The user's message")],
    address: AddressOption = None,
    user: Annotated[str, typer.Option(help="User id")] = os.environ.get("USER", "anonymous"),
    model: Annotated[str, typer.Option(help="Model tier: normal or high")] = "normal",
    max_rounds: Annotated[int | None, typer.Option(help="Force-complete after this many rounds")] = None,
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Ask for approvals (default: when on a TTY)")] = None,
) -> None:
    """Start a prompt, stream its outputs, and ask for approvals on a TTY."""
    settings = _settings(address)
    if model not in ("normal", "high"):
        raise typer.BadParameter("model must be 'normal' or 'high'")
    ask = sys.stdin.isatty() if interactive is None else interactive

    async def main() -> int:
        client = await AgentClient.connect(settings)
        tier: ModelTier = "high" if model == "high" else "normal"
        handle = await client.start(text, user_id=user, model=tier, max_rounds=max_rounds)
        console.print(f"prompt {handle.id}")
        console.print(f"Temporal UI: {settings.workflow_url(handle.id)}")
        state = await _follow(handle, interactive=ask, approver=user)
        prompt = await handle.get()
        if prompt.error:
            console.print(f"error: {prompt.error}")
        if state in TERMINAL_STATES:
            console.print(next(line for line in describe_prompt(prompt) if line.startswith("usage")))
        console.print(f"state: {prompt.state}")
        return 1 if prompt.state in ("failed", "cancelled") else 0

    _run_async(main)


@app.command()
def watch(
    prompt_id: Annotated[str, typer.Argument(help="Prompt (workflow) id")],
    address: AddressOption = None,
    from_offset: Annotated[int, typer.Option("--from", help="Resume from this event sequence number")] = 0,
) -> None:
    """Follow a prompt live: every output, state change and approval request, and streamed model text."""
    settings = _settings(address)

    async def main() -> int:
        handle = (await AgentClient.connect(settings)).prompt(prompt_id)
        state = await _follow(handle, interactive=None, approver="", from_offset=from_offset)
        return 1 if state in ("failed", "cancelled") else 0

    _run_async(main)


@app.command()
def chat(
    address: AddressOption = None,
    user: Annotated[str, typer.Option(help="User id")] = os.environ.get("USER", "anonymous"),
    conversation_id: Annotated[str | None, typer.Option("--conversation", help="Resume this conversation")] = None,
) -> None:
    """An interactive conversation: each line you type is a prompt with the whole conversation as history.
    Approvals are asked inline. Empty line or Ctrl-D ends the session (the conversation stays open)."""
    settings = _settings(address)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        conversation = await client.start_conversation(user_id=user, conversation_id=conversation_id)
        console.print(f"conversation {conversation.id}  (resume with: dagent chat --conversation {conversation.id})")
        while True:
            try:
                line = await asyncio.to_thread(input, "you> ")
            except EOFError:
                line = ""
            if not line.strip():
                return 0
            prompt = await conversation.send(line, user_id=user)
            await conversation.prompt_started(prompt.id, timeout=300)
            await _follow(prompt, interactive=True, approver=user)

    _run_async(main)


@app.command()
def show(
    prompt_id: Annotated[str, typer.Argument(help="Prompt (workflow) id")],
    address: AddressOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full record as JSON")] = False,
) -> None:
    """Print a prompt's record."""
    settings = _settings(address)

    async def main() -> int:
        prompt = await (await AgentClient.connect(settings)).prompt(prompt_id).get()
        if as_json:
            console.print_json(prompt.model_dump_json())
        else:
            for line in describe_prompt(prompt):
                console.print(line)
        console.print(f"Temporal UI: {settings.workflow_url(prompt_id)}")
        return 0

    _run_async(main)


@app.command()
def approve(
    prompt_id: str,
    tool_call_id: str,
    address: AddressOption = None,
    by: Annotated[str, typer.Option(help="Approver id")] = os.environ.get("USER", "cli"),
    input: Annotated[str | None, typer.Option("--input", help="Corrected arguments as a JSON object")] = None,
) -> None:
    """Approve a pending tool call; waits for and prints the call's result."""
    settings = _settings(address)
    corrected = json.loads(input) if input else None
    if corrected is not None and not isinstance(corrected, dict):
        raise typer.BadParameter("--input must be a JSON object")

    async def main() -> int:
        handle = (await AgentClient.connect(settings)).prompt(prompt_id)
        resolved = await handle.approve(tool_call_id, by=by, input=corrected, wait=True)
        console.print(describe_output(resolved) if resolved else "approved")
        return 0

    _run_async(main)


@app.command()
def reject(
    prompt_id: str,
    tool_call_id: str,
    address: AddressOption = None,
    by: Annotated[str, typer.Option(help="Approver id")] = os.environ.get("USER", "cli"),
    reason: Annotated[str | None, typer.Option(help="Why; the model sees it")] = None,
) -> None:
    """Reject a pending tool call; the model sees the rejection and its reason."""
    settings = _settings(address)

    async def main() -> int:
        handle = (await AgentClient.connect(settings)).prompt(prompt_id)
        resolved = await handle.reject(tool_call_id, by=by, reason=reason, wait=True)
        console.print(describe_output(resolved) if resolved else "rejected")
        return 0

    _run_async(main)


@app.command()
def pending(
    address: AddressOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's prompts")] = None,
) -> None:
    """List every prompt waiting for approval, with its pending call."""
    settings = _settings(address)

    async def main() -> int:
        client = await AgentClient.connect(settings)
        waiting = await client.waiting_prompts(user_id=user)
        if not waiting:
            console.print("no prompt is waiting for approval")
        for item in waiting:
            for call in await client.prompt(item.prompt_id).pending_approvals():
                console.print(f"{item.prompt_id}  user={item.user_id}  {call.tool_call_id}  {call.tool} "
                              f"{json.dumps(call.input)}  — {call.reason}")
        return 0

    _run_async(main)


@app.command()
def cancel(prompt_id: str, address: AddressOption = None) -> None:
    """Cancel a prompt: it ends as `cancelled` and keeps its outputs."""
    settings = _settings(address)

    async def main() -> int:
        await (await AgentClient.connect(settings)).prompt(prompt_id).cancel()
        console.print(f"cancellation requested for {prompt_id}")
        return 0

    _run_async(main)


@app.command()
def api(
    address: AddressOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8000,
    config: Annotated[Path | None, typer.Option(help="API config (TOML): API keys, OIDC, limits; "
                                                     "default $DAGENT_API_CONFIG")] = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), live events (SSE, AG-UI) and the inbox and chat pages."""
    import uvicorn

    from api import create_app
    from api.config import ApiConfig

    settings = _settings(address)
    app_ = create_app(config=ApiConfig.load(config), settings=settings)
    err_console.print(f"API on http://{host}:{port}  (docs /docs, inbox /inbox, chat /chat) "
                      f"Temporal {settings.temporal_address}")
    uvicorn.run(app_, host=host, port=port, log_level=settings.log_level.lower(), proxy_headers=True)
    _exit(0)


@app.command()
def demo(
    db_file: Annotated[Path, typer.Option(help="SQLite file of the embedded server")] = Path(".dagent/demo.db"),
    keep: Annotated[bool, typer.Option(help="Keep the server running afterwards to browse the UI")] = False,
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Ask for the approval (default: when on a TTY)")] = None,
) -> None:
    """The quick start: embedded dev server + worker + a prompt that needs an approval."""
    from cli.demo import run_demo

    configure_logging(os.environ.get("DAGENT_LOG_LEVEL", "WARNING"))
    ask = sys.stdin.isatty() if interactive is None else interactive
    _run_async(lambda: run_demo(db_file=db_file, keep=keep, interactive=ask, console=console,
                                ask=_ask, input_text=DEMO_INPUT))


if __name__ == "__main__":
    app()
