"""MCP servers as tool sources, on the worker: list tools (cached with a TTL), call them, read context.

Each server is reached through the MCP SDK's own `mcp.Client` (2.x), which owns the transport (a stdio
process, or streamable HTTP), the protocol negotiation (`server/discover`, falling back to the `initialize`
handshake of a 2025-era server) and the requests. A worker keeps one open `Client` per server, so a stdio
server runs as long as the worker and a stateful server keeps its session, and opens a new one after a failure
that left the connection unusable: a server that crashed or was restarted costs the calls in flight, not later
ones. The MCP SDK (the `mcp` extra) is imported when a server is first opened, never by a worker without MCP
servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from durable_agent.agent.context import ToolContext
from durable_agent.agent.extras import require
from durable_agent.agent.logging import get_logger
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.tools import Approval, ApprovalPolicy, JsonArguments, Tool, ToolFailed

if TYPE_CHECKING:
    from mcp import Client
    from mcp import types as mcp_types

log = get_logger("dagent.mcp")
MCP_FEATURE = "MCP servers as tools"
CLOSE_TIMEOUT_SECONDS = 10.0  # stopping a stdio server can take seconds; a worker's shutdown waits this long


class MCPUnavailable(Exception):
    """The server could not be reached, started or listed."""


class MCPCallFailed(Exception):
    """The server broke during a call (crashed, timed out, answered with a malformed result)."""


@dataclass
class _Listing:
    expires_at: float
    tools: list[Tool[Any]]
    context: list[str]


class _Connection:
    """One open `mcp.Client`, entered and left by a task of its own: the SDK's transports run in a task group
    that must be entered and left in the same task, while calls come from many activity tasks."""

    def __init__(self, sources: MCPToolSources, server: MCPServer) -> None:
        self.server = server
        self.dead = False
        self._client: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # an error is retrieved even when every waiter timed out (no "exception was never retrieved")
        self._client.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._own(sources), name=f"mcp-{server.name}")

    async def _own(self, sources: MCPToolSources) -> None:
        failure: BaseException | None = None
        try:
            async with sources.open_client(self.server) as client:
                self._client.set_result(client)
                await self._closing.wait()
        except BaseException as exc:
            failure = exc
            if self._client.done() and not self._closing.is_set():
                log.warning("mcp connection lost", server=self.server.name, error=_describe(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.dead = True
            if not self._client.done():
                self._client.set_exception(MCPUnavailable(
                    f"MCP server '{self.server.name}' is unavailable: {_describe(failure)}"))

    async def client(self) -> Client:
        """The connected client, once the transport is open and the protocol negotiated."""
        return await asyncio.shield(self._client)

    @property
    def ended(self) -> bool:
        return self._task.done()

    def close_soon(self) -> None:
        """Start closing (stopping a stdio server can take seconds); `closed` waits for the end."""
        self.dead = True
        self._closing.set()

    async def closed(self) -> None:
        self.close_soon()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._task), timeout=CLOSE_TIMEOUT_SECONDS)


class MCPToolSources:
    """One per worker: a connection per declared MCP server (reopened after a failure), and each server's
    tools, listed at most once per `list_ttl`. (The `mcp.Client`'s own response cache is off: it lives and dies
    with one connection, while this listing outlives reconnections and holds the tools already converted.)"""

    def __init__(self, env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._env = os.environ if env is None else env
        self._clock = clock
        self._listings: dict[tuple[Any, ...], _Listing] = {}
        self._connections: dict[tuple[Any, ...], _Connection] = {}
        self._closing: set[_Connection] = set()
        self._locks: dict[tuple[Any, ...], asyncio.Lock] = {}
        self.listings_fetched = 0
        self.connections_opened = 0

    async def tools(self, server: MCPServer) -> list[Tool[Any]]:
        return (await self._listing(server)).tools

    async def context(self, server: MCPServer) -> list[str]:
        return (await self._listing(server)).context

    async def find(self, server: MCPServer, tool_id: str) -> Tool[Any] | None:
        return next((t for t in await self.tools(server) if t.id == tool_id), None)

    async def aclose(self) -> None:
        """Stop every server process and close every connection (a worker's shutdown)."""
        connections = [*self._connections.values(), *self._closing]
        self._connections, self._closing = {}, set()
        await asyncio.gather(*(connection.closed() for connection in connections))

    async def _listing(self, server: MCPServer) -> _Listing:
        key = server.cache_key()
        async with self._locks.setdefault(("list", *key), asyncio.Lock()):
            cached = self._listings.get(key)
            if cached is not None and cached.expires_at > self._clock():
                return cached
            connection = await self._connection(server)
            try:
                async with asyncio.timeout(server.connect_timeout.total_seconds()):
                    client = await connection.client()
                    listed = await _list_all_tools(client)
                    context = await _read_context(server, client)
            except Exception as exc:
                self._drop(connection)
                if isinstance(exc, MCPUnavailable):
                    raise
                raise MCPUnavailable(f"MCP server '{server.name}' is unavailable: {_describe(exc)}") from exc
            self.listings_fetched += 1
            tools = [self._tool(server, t) for t in listed if server.offers(t.name)]
            log.info("mcp tools listed", server=server.name, tools=len(tools), protocol=client.protocol_version)
            listing = _Listing(expires_at=self._clock() + server.list_ttl.total_seconds(), tools=tools,
                               context=context)
            self._listings[key] = listing
            return listing

    async def _connection(self, server: MCPServer) -> _Connection:
        key = server.cache_key()
        async with self._locks.setdefault(("connect", *key), asyncio.Lock()):
            connection = self._connections.get(key)
            if connection is None or connection.dead:
                connection = _Connection(self, server)
                self._connections[key] = connection
                self.connections_opened += 1
            return connection

    def _drop(self, connection: _Connection) -> None:
        key = connection.server.cache_key()
        if self._connections.get(key) is connection:
            del self._connections[key]
        connection.close_soon()
        self._closing = {c for c in self._closing if not c.ended} | {connection}

    @asynccontextmanager
    async def open_client(self, server: MCPServer) -> AsyncIterator[Client]:
        """A connected `mcp.Client` for the server: a stdio process, or streamable HTTP with the headers from
        the worker's environment."""
        require("mcp", f"{MCP_FEATURE} (server '{server.name}')")
        from mcp import Client, StdioServerParameters, stdio_client

        async with AsyncExitStack() as stack:
            if server.command is not None:
                env = {name: self._env[name] for name in server.env_from if name in self._env}
                target: Any = stdio_client(StdioServerParameters(
                    command=server.command, args=list(server.args), env={**env, **server.env} or None, cwd=server.cwd))
            else:
                import httpx2  # the MCP SDK's HTTP client (and the provider SDKs')
                from mcp.client.streamable_http import streamable_http_client

                assert server.url is not None
                http = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=self._headers(server), follow_redirects=False,
                    timeout=httpx2.Timeout(server.timeout.total_seconds(),
                                           connect=server.connect_timeout.total_seconds())))
                target = streamable_http_client(server.url, http_client=http)
            async with asyncio.timeout(server.connect_timeout.total_seconds()):
                client = await stack.enter_async_context(Client(target, cache=None))
            yield client

    def _headers(self, server: MCPServer) -> dict[str, str]:
        missing = [var for var in server.headers_from_env.values() if var not in self._env]
        if missing:
            raise MCPUnavailable(f"MCP server '{server.name}': the worker's environment lacks {', '.join(missing)}")
        return {header: self._env[var] for header, var in server.headers_from_env.items()}

    def _tool(self, server: MCPServer, listed: mcp_types.Tool) -> Tool[Any]:
        name = listed.name

        async def call(args: JsonArguments, ctx: ToolContext) -> JsonValue:
            return await self.call(server, name, args.model_dump(mode="json"), ctx)

        return Tool(
            id=server.tool_id(name), description=listed.description or f"{name} (MCP server {server.name})",
            input_model=JsonArguments, fn=call, approval=_dict_policy(server.policy_for(name)),
            options=server.tool_options,
            input_schema=dict(listed.input_schema or {"type": "object"}),
            metadata={"mcp_server": server.name, "mcp_tool": name},
        )

    async def call(self, server: MCPServer, tool_name: str, arguments: dict[str, Any], ctx: ToolContext) -> JsonValue:
        """Call one tool. A broken connection, a timeout or a malformed answer raises `MCPCallFailed` (retried
        per the tool's attempts, on a fresh connection when this one is unusable); an `is_error` result raises
        `ToolFailed`, which the model sees as the tool's error without a retry."""
        budget = server.timeout.total_seconds() * 0.9  # answer before the activity's own timeout fires
        connection = await self._connection(server)
        try:
            async with asyncio.timeout(budget):
                client = await connection.client()
                result = await client.call_tool(tool_name, arguments, meta={"idempotency_key": ctx.idempotency_key})
        except TimeoutError as exc:
            self._drop(connection)  # a server that stopped answering may be stuck
            raise MCPCallFailed(f"MCP server '{server.name}' timed out during '{tool_name}' "
                                f"after {budget:g} s") from exc
        except Exception as exc:
            if not _answered_over_a_working_connection(exc):
                self._drop(connection)
            raise MCPCallFailed(f"MCP server '{server.name}' failed during '{tool_name}': {_describe(exc)}") from exc
        if result.is_error:
            raise ToolFailed(_content_text(result.content) or f"MCP tool '{tool_name}' reported an error")
        if result.structured_content is not None:
            return result.structured_content
        return _content_text(result.content)


def _answered_over_a_working_connection(exc: Exception) -> bool:
    """A JSON-RPC error response (an unknown tool, a server-side failure) came over a connection that still
    works, so the next call may reuse it; a closed connection or a request timeout is not such an answer."""
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    return isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)


async def _list_all_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def _read_context(server: MCPServer, client: Client) -> list[str]:
    from mcp import types as mcp_types

    items: list[str] = []
    for uri in server.resources:
        read = await client.read_resource(uri)
        texts = [c.text for c in read.contents if isinstance(c, mcp_types.TextResourceContents)]
        items.append(f"[{server.name} resource {uri}]\n" + "\n".join(texts))
    for name in server.prompts:
        prompt = await client.get_prompt(name)
        items.append(f"[{server.name} prompt {name}]\n" + _content_text([m.content for m in prompt.messages]))
    return items


def _content_text(blocks: list[Any]) -> str:
    from mcp import types as mcp_types

    parts: list[str] = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 characters]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            inner = block.resource
            parts.append(inner.text if isinstance(inner, mcp_types.TextResourceContents) else f"[resource {inner.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    return "\n".join(parts)


def _dict_policy(policy: ApprovalPolicy | None) -> ApprovalPolicy | None:
    """MCP policies decide on the arguments as a plain dict, not a pydantic model."""
    if policy is None or isinstance(policy, Approval):
        return policy
    return lambda args: policy(args.model_dump(mode="json"))


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "the connection closed"
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
