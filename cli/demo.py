"""The quick start: an embedded dev server, a worker, and a prompt that needs an approval."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rich.console import Console

from durable_agent.activities.notify_config import NotifyConfig
from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.extras import install_hint, missing_modules
from durable_agent.cli.demo_webhooks import demo_webhooks
from durable_agent.cli.devserver import DevServer, free_port
from durable_agent.cli.errors import until_interrupted
from durable_agent.cli.follow import follow
from durable_agent.cli.render import describe_prompt
from durable_agent.cli.ui_links import forget_server, remember_server
from durable_agent.client import AgentClient, DecisionRefused
from durable_agent.config.observability import flush_traces
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, connect, create_worker

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


async def run_demo(*, db_file: Path, keep: bool, interactive: bool, console: Console, input_text: str,
                   port: int = PREFERRED_PORT, ui_port: int = PREFERRED_UI_PORT, trace: bool = False) -> int:
    """With `trace`, the prompt's spans are collected in memory and printed as a tree at the end (`otel` extra)."""
    if trace:
        from durable_agent.workers.trace_tree import collect_in_memory, trace_tree
    spans = collect_in_memory() if trace else None
    server = DevServer(port=_port_or_free(port), ui_port=_port_or_free(ui_port), db_file=db_file)
    console.print(f"Starting the Temporal dev server on {server.address} (UI {server.ui_url}, db {db_file}) …")
    await server.start_async()
    remember_server(server.address, server.ui_url, server.pid)  # `dagent run`/`show` meanwhile link to its UI
    state = "failed"
    try:
        settings = Settings(temporal_address=server.address, ui_url=server.ui_url or "",
                            task_queue=f"durable-agent-demo-{uuid.uuid4().hex[:6]}")
        client = await connect(settings)
        agent = AgentClient(client, settings)
        async with demo_webhooks(console) as told, \
                create_worker(client, _telling(build_runtime(settings), told), task_queue=settings.task_queue), \
                _web_api(agent, console):
            console.print("Worker running (plugin plugins.demo, offline scripted model).")
            handle = await agent.start(input_text, user_id="quickstart")
            console.print(f"\nprompt {handle.id}: {input_text}")
            console.print(f"Temporal UI (while the server runs): {settings.workflow_url(handle.id)}")
            if not interactive:
                approving = asyncio.create_task(_approve_from_second_client(settings, handle.id, console))
            state = await follow(handle, console, interactive=True if interactive else None, approver=APPROVER)
            if not interactive:
                await approving
            prompt = await handle.result()
            state = prompt.state
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
                await until_interrupted()
            else:
                console.print(f"(The server stops now; `dagent server --db-file {db_file}` brings it back "
                              "with this history.)")
    finally:
        forget_server(server.address, server.pid)
        await server.stop_async()
    return 0 if state == "completed" else 1


def _telling(runtime: AgentRuntime, told: NotifyConfig) -> AgentRuntime:
    """Every approval of the demo tells the terminal's webhook receiver (cli/demo_webhooks.py)."""
    runtime.notify, runtime.notify_config = told.default, told
    return runtime


@asynccontextmanager
async def _web_api(agent: AgentClient, console: Console) -> AsyncIterator[None]:
    """`dagent api` in-process, with a one-time API key for the quick-start user (approver and admin); left out,
    with a note, when the `api` extra is not installed."""
    if missing_modules("api"):
        console.print(f"Web API and inbox: not started (`{install_hint('api')}` adds them)")
        yield
        return
    from durable_agent.api import create_app
    from durable_agent.api.config import ApiConfig, ApiKey
    from durable_agent.api.server import serve_in_background

    key = secrets.token_urlsafe(24)
    config = ApiConfig(api_keys=[ApiKey(principal="quickstart", key=key, roles=["approver", "admin"])])
    async with serve_in_background(create_app(agent, config), port=_port_or_free(PREFERRED_API_PORT)) as url:
        console.print(f"Web API {url}/docs   approvals inbox: {url}/inbox#key={key}")
        console.print(f"                            chat: {url}/chat#key={key}")
        yield


async def _approve_from_second_client(settings: Settings, prompt_id: str, console: Console) -> None:
    """Decide as an approver elsewhere would (`dagent approve`, the UI's approve_call update)."""
    approver = (await AgentClient.connect(settings)).prompt(prompt_id)
    prompt = await approver.wait_until("waiting_for_approval", poll_interval=0.2)
    for pending in await approver.pending_approvals():
        console.print(f"    Approving from a second client: dagent approve {prompt.id} {pending.tool_call_id}")
        with contextlib.suppress(DecisionRefused):
            await approver.approve(pending.tool_call_id, by=APPROVER, wait=True)
