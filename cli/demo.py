"""The quick start: an embedded dev server, a worker, and a prompt that needs an approval."""

from __future__ import annotations

import asyncio
import secrets
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from rich.console import Console

from agent.models import ToolOutput, ToolPending
from cli.render import describe_output, describe_prompt
from client import AgentClient
from workers.devserver import DevServer, free_port
from workers.settings import Settings
from workers.worker import build_runtime, connect, create_worker

PREFERRED_PORT, PREFERRED_UI_PORT, PREFERRED_API_PORT = 7233, 8233, 8000
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
                   ask: Callable[[str], Awaitable[bool]], input_text: str) -> int:
    server = DevServer(port=_port_or_free(PREFERRED_PORT), ui_port=_port_or_free(PREFERRED_UI_PORT),
                       db_file=db_file)
    console.print(f"Starting the Temporal dev server on {server.address} (UI {server.ui_url}, db {db_file}) …")
    await server.start_async()
    try:
        settings = Settings(temporal_address=server.address, ui_url=server.ui_url or "",
                            task_queue=f"durable-agent-demo-{uuid.uuid4().hex[:6]}")
        client = await connect(settings)
        async with create_worker(client, build_runtime(settings), task_queue=settings.task_queue), \
                _web_api(AgentClient(client, settings), console):
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


@asynccontextmanager
async def _web_api(agent: AgentClient, console: Console) -> AsyncIterator[str]:
    """`dagent api` in-process, with a one-time API key for the quick-start user (approver and admin)."""
    from api import create_app
    from api.config import ApiConfig, ApiKey
    from api.server import serve_in_background

    key = secrets.token_urlsafe(24)
    config = ApiConfig(api_keys=[ApiKey(principal="quickstart", key=key, roles=["approver", "admin"])])
    async with serve_in_background(create_app(agent, config), port=_port_or_free(PREFERRED_API_PORT)) as url:
        console.print(f"Web API {url}/docs   approvals inbox: {url}/inbox#key={key}")
        console.print(f"                            chat: {url}/chat#key={key}")
        yield url


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
