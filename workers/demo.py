"""The quick start: an embedded dev server, a worker, and a prompt that needs an approval."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console

from agent.models import ToolOutput, ToolPending
from cli.render import describe_output, describe_prompt
from client import AgentClient
from workers.devserver import DevServer, free_port
from workers.observability import flush_traces
from workers.settings import Settings
from workers.trace_tree import collect_in_memory, trace_tree
from workers.worker import build_runtime, connect, create_worker

PREFERRED_PORT, PREFERRED_UI_PORT = 7233, 8233
APPROVER = "quickstart-approver"


def _port_or_free(preferred: int) -> int:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
        except OSError:
            return free_port()
    return preferred


async def run_demo(*, db_file: Path, keep: bool, interactive: bool, console: Console,
                   ask: Callable[[str], Awaitable[bool]], input_text: str, trace: bool = False) -> int:
    """With `trace`, the prompt's spans are collected in memory and printed as a tree at the end."""
    spans = collect_in_memory() if trace else None
    server = DevServer(port=_port_or_free(PREFERRED_PORT), ui_port=_port_or_free(PREFERRED_UI_PORT),
                       db_file=db_file)
    console.print(f"Starting the Temporal dev server on {server.address} (UI {server.ui_url}, db {db_file}) …")
    await server.start_async()
    try:
        settings = Settings(temporal_address=server.address, ui_url=server.ui_url or "",
                            task_queue=f"durable-agent-demo-{uuid.uuid4().hex[:6]}")
        client = await connect(settings)
        async with create_worker(client, build_runtime(settings), task_queue=settings.task_queue):
            console.print("Worker running (plugin plugins.demo, offline scripted model).")
            agent = AgentClient(client, settings)
            handle = await agent.start(input_text, user_id="quickstart")
            console.print(f"\nprompt {handle.id}: {input_text}")
            async for index, entry, _ in handle.follow():
                console.print(f"[{index}] {describe_output(entry)}")
                if isinstance(entry, ToolOutput) and isinstance(entry.result, ToolPending):
                    await _decide(settings, handle.id, entry, interactive, console, ask)
            prompt = await handle.result()
            console.print("\nThe record (dagent show / query get_prompt):")
            for line in describe_prompt(prompt):
                console.print(f"  {line}")
            if spans is not None and prompt.trace_id:
                flush_traces()
                console.print(f"\nTrace {prompt.trace_id} (OpenTelemetry; OTEL_EXPORTER_OTLP_ENDPOINT sends it "
                              "to a backend):")
                for line in trace_tree(spans.get_finished_spans(), prompt.trace_id):
                    console.print(f"  {line}")
            console.print(f"\nTemporal UI: {settings.workflow_url(handle.id)}")
            if keep:
                console.print("Server and worker keep running; Ctrl-C stops them.")
                await _wait_for_interrupt()
            else:
                console.print(f"(The server stops now; `dagent server --db-file {db_file}` brings it back "
                              "with this history.)")
            return 0 if prompt.state == "completed" else 1
    finally:
        await server.stop_async()


async def _decide(settings: Settings, prompt_id: str, entry: ToolOutput, interactive: bool, console: Console,
                  ask: Callable[[str], Awaitable[bool]]) -> None:
    assert isinstance(entry.result, ToolPending)
    console.print(f"    The prompt is waiting: {entry.result.reason}")
    # A second client decides, as an approver elsewhere would (`dagent approve`, `temporal workflow signal`).
    approver = await AgentClient.connect(settings)
    if interactive and not await ask(f"Approve {entry.tool}?"):
        await approver.prompt(prompt_id).reject(entry.id, by=APPROVER, reason="rejected in the quick start")
        return
    if not interactive:
        console.print(f"    Approving from a second client: dagent approve {prompt_id} {entry.id}")
    await approver.prompt(prompt_id).approve(entry.id, by=APPROVER)


async def _wait_for_interrupt() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
