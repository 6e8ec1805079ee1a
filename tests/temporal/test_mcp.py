"""MCP servers as tool sources, on the MCP SDK 2.x's `mcp.Client`, against real MCP servers the tests start
(tests/fakes/mcp_server.py, the SDK's MCPServer, over stdio and streamable HTTP, where the client negotiates the
2026-07-28 protocol; tests/fakes/mcp_raw_server.py, which knows only the 2025-era `initialize` handshake and
answers with a malformed result) and a real Temporal dev server."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.mcp_tools import MCPCallFailed, MCPToolSources
from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.context import ToolContext
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.workers import TEST_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def stdio_server(name: str = "fake", **options: object) -> MCPServer:
    return MCPServer(name, command=sys.executable, args=("-m", "tests.fakes.mcp_server", "stdio"),
                     cwd=str(ROOT), **options)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServerProcess:
    """tests/fakes/mcp_server.py serving streamable HTTP in its own process."""

    def __init__(self, markers: Path) -> None:
        self.port = _free_port()
        env = {**os.environ, "MCP_FAKE_MARKERS": str(markers)}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.mcp_server", "http", str(self.port)],
                                     cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def ready(self) -> None:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, "the MCP HTTP server exited"
                await asyncio.sleep(0.1)
        raise AssertionError("the MCP HTTP server did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def http_server(markers: Path) -> Iterator[HttpServerProcess]:
    server = HttpServerProcess(markers)
    try:
        yield server
    finally:
        server.kill()


@asynccontextmanager
async def mcp_worker(env: WorkflowEnvironment, servers: Sequence[MCPServer], model: ScriptedModel,
                     sources: MCPToolSources | None = None, client: Client | None = None,
                     ) -> AsyncIterator[tuple[AgentClient, AgentRuntime]]:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    runtime = build_runtime(settings, plugins=[Plugin("mcp", mcp_servers=servers)],
                            providers={"normal": model, "high": model})
    if sources is not None:
        runtime.mcp = sources
    client = client or env.client
    try:
        async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings):
            yield AgentClient(client, settings), runtime
    finally:
        await runtime.mcp.aclose()


def first_round(*calls: tuple[str, object]) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(*calls)  # type: ignore[arg-type]
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return text(" | ".join(f"{r.tool}={'ERR' if r.is_error else 'OK'}" for r in results))

    return ScriptedModel(script)


def tool_entries(prompt: object) -> list[ToolOutput]:
    return [o for o in prompt.output if isinstance(o, ToolOutput)]  # type: ignore[attr-defined]


async def test_stdio_server_tools_run_as_tool_activities_with_listing_cached(dev_env: WorkflowEnvironment) -> None:
    server = stdio_server(env_from=("MCP_FAKE_ENV",), resources=("note://readme",), prompts=("house_style",))
    model = first_round(("fake.add", {"a": 2, "b": 3}), ("fake.whoami", {}), ("fake.add", {"a": "two"}))
    sources = MCPToolSources(env={**os.environ, "MCP_FAKE_ENV": "from-the-worker"})
    async with mcp_worker(dev_env, [server], model, sources) as (client, _):
        handle = await client.start("use the server")
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    add, whoami, invalid = tool_entries(prompt)
    assert add.tool == "fake.add" and add.result == ToolSuccess(output={"result": 5})
    assert isinstance(whoami.result, ToolSuccess)
    run_id = (await handle.workflow.describe()).run_id  # keys are run-scoped (docs/approvals-policy.md)
    assert whoami.result.output == {"authorization": None, "idempotency_key": f"{handle.id}/{run_id}/{whoami.id}",
                                    "fake_env": "from-the-worker"}
    assert isinstance(invalid.result, ToolError)
    assert invalid.result.error == "Invalid arguments for tool 'fake.add': <root>: 'b' is a required property; " \
                                   "a: 'two' is not of type 'integer'"
    offered = {t.id: t for t in model.requests[0].tools}
    assert offered["fake.add"].parameters["properties"] == {"a": {"title": "A", "type": "integer"},
                                                            "b": {"title": "B", "type": "integer"}}
    assert "The warehouse code is W-42." in model.requests[0].instructions
    assert "Answer in one short sentence." in model.requests[0].instructions
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert scheduled.count("dagent.invoke_tool") == 2  # the invalid call never reached the server
    assert sources.listings_fetched == 1  # two rounds and two calls, one listing (TTL 5 min)
    assert sources.connections_opened == 1  # one stdio server process for all of it
    assert prompt.state == "completed"


async def test_listing_expires_after_its_ttl() -> None:
    now = [0.0]
    sources = MCPToolSources(clock=lambda: now[0])
    server = stdio_server(tools=("add",))
    assert [t.id for t in await sources.tools(server)] == ["fake.add"]
    now[0] = 299.0
    await sources.tools(server)
    assert sources.listings_fetched == 1
    now[0] = 301.0
    await sources.tools(server)
    assert sources.listings_fetched == 2
    await sources.aclose()


async def test_a_stateful_server_keeps_its_state_across_rounds_and_prompts_of_a_worker(
        dev_env: WorkflowEnvironment) -> None:
    """One server process and one connection per worker: what a server keeps between calls (here a tally in the
    process) is there for the next call, the next round and the next prompt."""
    rounds = [tool_calls(("fake.count", {"name": "visits"})), tool_calls(("fake.count", {"name": "visits"}))]

    def script(request: ModelRequest) -> ModelResponse:
        return rounds[request.round - 1] if request.round <= len(rounds) else text("counted")

    sources = MCPToolSources()
    async with mcp_worker(dev_env, [stdio_server()], ScriptedModel(script), sources) as (client, _):
        first = await client.run("count twice")
        second = await client.run("count twice more")
    outputs = [o.result.output for p in (first, second) for o in tool_entries(p)  # type: ignore[union-attr]
               if isinstance(o.result, ToolSuccess)]
    assert [o["count"] for o in outputs] == [1, 2, 3, 4]  # type: ignore[index]
    assert len({o["pid"] for o in outputs}) == 1  # type: ignore[index]
    assert sources.connections_opened == 1


async def test_a_traced_call_carries_the_prompt_trace_to_the_server(dev_env: WorkflowEnvironment) -> None:
    """With tracing on, the SDK's client span for the call sits under the tool's span in the prompt's trace, and
    the server receives that trace in `_meta` (SEP-414), so a traced server's spans join the prompt's trace."""
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    from bench.spans import finished_spans, memory_exporter, of_trace, parent_of, render_tree

    memory_exporter()
    traced = await Client.connect(dev_env.client.service_client.config.target_host, namespace=dev_env.client.namespace,
                                  plugins=[DurableAgentPlugin(TEST_SETTINGS), OpenTelemetryPlugin()])
    model = first_round(("fake.trace_context", {}))
    async with mcp_worker(dev_env, [stdio_server()], model, client=traced) as (client, _):
        prompt = await client.run("trace the call")
    (call,) = tool_entries(prompt)
    assert isinstance(call.result, ToolSuccess) and prompt.trace_id
    spans = of_trace(finished_spans(), prompt.trace_id)
    (sent,) = [s for s in spans if s.name == "MCP send tools/call trace_context"]
    parent = parent_of(spans, sent)
    assert parent is not None and parent.name == "execute_tool fake.trace_context", render_tree(spans)
    assert call.result.output == {"traceparent": f"00-{prompt.trace_id}-{sent.span_id}-01"}


async def test_approval_static_by_pattern_and_by_input(dev_env: WorkflowEnvironment) -> None:
    server = stdio_server(
        approval=Approval(reason="Every fake tool needs a look."),
        approval_by_tool={"shout": lambda args: Approval(reason="secret!") if "secret" in args["text"] else None})
    model = first_round(("fake.shout", {"text": "hello"}), ("fake.shout", {"text": "a secret"}),
                        ("fake.add", {"a": 1, "b": 1}))
    async with mcp_worker(dev_env, [server], model) as (client, _):
        handle = await client.start("shout")
        await handle.wait_until("waiting_for_approval")
        pending = []
        for _ in range(200):
            pending = await handle.pending_approvals()
            if len(pending) == 2:
                break
            await asyncio.sleep(0.05)
        assert [(p.tool, p.reason) for p in pending] == [("fake.shout", "secret!"),
                                                        ("fake.add", "Every fake tool needs a look.")]
        await handle.approve(pending[0].tool_call_id, by="alice", input={"text": "a public note"})
        await handle.reject(pending[1].tool_call_id, by="alice", reason="no sums today")
        prompt = await handle.result()
    results = [(o.tool, o.result) for o in tool_entries(prompt)]
    assert results == [("fake.shout", ToolSuccess(output={"result": "HELLO"})),
                       ("fake.shout", ToolSuccess(output={"result": "A PUBLIC NOTE"})),
                       ("fake.add", ToolError(error="The call was rejected by alice: no sums today"))]


async def test_server_failures_become_tool_errors_the_model_sees(dev_env: WorkflowEnvironment) -> None:
    raw = MCPServer("raw", command=sys.executable, args=("-m", "tests.fakes.mcp_raw_server"), cwd=str(ROOT))
    missing = MCPServer("gone", command=str(ROOT / "no-such-server"))
    rounds = [tool_calls(("fake.refuse", {"reason": "not today"}), ("raw.broken", {}), ("gone.anything", {})),
              tool_calls(("fake.crash", {})),
              tool_calls(("fake.add", {"a": 1, "b": 2}))]

    def script(request: ModelRequest) -> ModelResponse:
        if request.round <= len(rounds):
            return rounds[request.round - 1]
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return text(" | ".join(f"{r.tool}={'ERR' if r.is_error else 'OK'}" for r in results))

    model = ScriptedModel(script)
    sources = MCPToolSources()
    async with mcp_worker(dev_env, [stdio_server(), raw, missing], model, sources) as (client, _):
        prompt = await client.run("break things")
    refuse, broken, gone, crash, add = tool_entries(prompt)
    assert refuse.result == ToolError(error="Error executing tool refuse: refused: not today")
    assert isinstance(broken.result, ToolError)
    assert broken.result.error.startswith("MCPCallFailed: MCP server 'raw' failed during 'broken': ")
    assert isinstance(gone.result, ToolError) and gone.result.error.startswith("Unknown tool 'gone.anything'")
    assert "MCP server 'gone' is unavailable" in model.requests[0].instructions
    assert isinstance(crash.result, ToolError)
    assert crash.result.error.startswith("MCPCallFailed: MCP server 'fake' failed during 'crash': ")
    assert add.result == ToolSuccess(output={"result": 3})  # on a new server process
    assert prompt.state == "completed"
    assert prompt.output[-1].text == (  # type: ignore[union-attr]
        "fake.refuse=ERR | raw.broken=ERR | gone.anything=ERR | fake.crash=ERR | fake.add=OK")


async def test_an_error_answer_keeps_the_connection_and_a_malformed_one_replaces_it() -> None:
    """A JSON-RPC error came over a connection that works: the next call reuses it. A malformed answer leaves it
    untrusted: the next call opens a new one (a new server process). Against the 2025-era raw server."""
    server = MCPServer("raw", command=sys.executable, args=("-m", "tests.fakes.mcp_raw_server"), cwd=str(ROOT))
    sources = MCPToolSources()
    ctx: ToolContext = SimpleNamespace(idempotency_key="key-1")  # type: ignore[assignment]  # all a call reads
    try:
        assert [t.id for t in await sources.tools(server)] == ["raw.broken", "raw.rpc_error", "raw.echo"]
        with pytest.raises(MCPCallFailed, match=r"^MCP server 'raw' failed during 'rpc_error': MCPError: no such arg"):
            await sources.call(server, "rpc_error", {}, ctx)
        assert await sources.call(server, "echo", {"n": 1}, ctx) == '{"n": 1}'
        assert sources.connections_opened == 1
        with pytest.raises(MCPCallFailed, match=r"^MCP server 'raw' failed during 'broken': ValidationError"):
            await sources.call(server, "broken", {}, ctx)
        assert await sources.call(server, "echo", {"n": 2}, ctx) == '{"n": 2}'
        assert sources.connections_opened == 2
    finally:
        await sources.aclose()


async def test_http_server_with_headers_from_the_worker_environment(
        dev_env: WorkflowEnvironment, http_server: HttpServerProcess) -> None:
    await http_server.ready()
    server = MCPServer("web", url=http_server.url, headers_from_env={"Authorization": "DAGENT_TEST_MCP_AUTH"})
    sources = MCPToolSources(env={"DAGENT_TEST_MCP_AUTH": "Bearer worker-secret"})
    model = first_round(("web.whoami", {}), ("web.add", {"a": 20, "b": 22}))
    async with mcp_worker(dev_env, [server], model, sources) as (client, _):
        handle = await client.start("who am i")
        prompt = await handle.result()
    whoami, add = tool_entries(prompt)
    run_id = (await handle.workflow.describe()).run_id
    assert whoami.result == ToolSuccess(output={"authorization": "Bearer worker-secret",
                                                "idempotency_key": f"{handle.id}/{run_id}/{whoami.id}",
                                                "fake_env": None})
    assert add.result == ToolSuccess(output={"result": 42})
    history = (await handle.workflow.fetch_history()).to_json()
    assert "worker-secret" not in history


@pytest.mark.parametrize("failure_mode", ["continue", "fail"])
async def test_http_server_killed_mid_call(dev_env: WorkflowEnvironment, http_server: HttpServerProcess,
                                           markers: Path, failure_mode: str) -> None:
    await http_server.ready()
    server = MCPServer("web", url=http_server.url, failure_mode=failure_mode)  # type: ignore[arg-type]
    model = first_round(("web.slow", {"seconds": 60, "tag": "victim"}))
    async with mcp_worker(dev_env, [server], model) as (client, _):
        handle = await client.start("slow", fail_workflow_on_error=False)
        for _ in range(600):
            if (markers / "victim.started").exists():
                break
            await asyncio.sleep(0.05)
        assert (markers / "victim.started").exists(), "the call never reached the server"
        http_server.kill()
        prompt = await handle.result()
    (call,) = tool_entries(prompt)
    assert isinstance(call.result, ToolError)
    assert call.result.error.startswith("MCPCallFailed: MCP server 'web' failed during 'slow': ")
    if failure_mode == "continue":
        assert prompt.state == "completed" and prompt.output[-1].text == "web.slow=ERR"  # type: ignore[union-attr]
    else:
        assert prompt.state == "failed" and "tool 'web.slow' failed" in (prompt.error or "")


async def test_a_call_that_outlives_its_timeout_is_an_error(dev_env: WorkflowEnvironment) -> None:
    from datetime import timedelta

    server = stdio_server(timeout=timedelta(seconds=6))
    model = first_round(("fake.slow", {"seconds": 60, "tag": "late"}))
    async with mcp_worker(dev_env, [server], model) as (client, _):
        prompt = await client.run("slow")
    (call,) = tool_entries(prompt)
    assert isinstance(call.result, ToolError)
    assert call.result.error == "MCPCallFailed: MCP server 'fake' timed out during 'slow' after 5.4 s"
    assert prompt.state == "completed"
