"""MCP servers as tool sources, on the worker: list tools (cached with a TTL), call them, read context.

A worker keeps one session per server (a stdio server runs as long as the worker) and opens a new one
after any failure, so a server that crashed or was restarted costs the calls in flight, not later ones.
The MCP SDK (the `mcp` extra) is imported when a server is first opened, never by a worker without MCP servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import AnyUrl, JsonValue

from durable_agent.agent.context import ToolContext
from durable_agent.agent.extras import require
from durable_agent.agent.logging import get_logger
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.tools import Approval, ApprovalPolicy, JsonArguments, Tool, ToolFailed

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp import types as mcp_types

log = get_logger("dagent.mcp")
MCP_FEATURE = "MCP servers as tools"
T = TypeVar("T")
PING_INTERVAL_SECONDS = 2.0  # while a request is in flight, a server that stops answering pings is dead
PING_TIMEOUT_SECONDS = 10.0


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
    """One open session, owned by a background task: the SDK's transports must be entered and left in the
    same task, while calls come from many activity tasks."""

    def __init__(self, sources: MCPToolSources, server: MCPServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.dead = False
        self._error: BaseException | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._ended = asyncio.Event()
        self._task = asyncio.create_task(self._own(sources), name=f"mcp-{server.name}")

    async def _own(self, sources: MCPToolSources) -> None:
        try:
            async with sources.open_session(self.server) as session:
                self.session = session
                self._ready.set()
                await self._closing.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self.dead = True
            self._ready.set()
            self._ended.set()

    async def run(self, request: Awaitable[T]) -> T:
        """Await a request on this session, failing as soon as the connection is found dead: the owner task
        ended, or the server stopped answering pings. (The SDK's HTTP transport leaves a request whose
        response stream broke waiting forever.)"""
        task = asyncio.ensure_future(request)
        ended = asyncio.ensure_future(self._ended.wait())
        watchdog = asyncio.ensure_future(self._ping_until_failure())
        try:
            await asyncio.wait({task, ended, watchdog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (ended, watchdog, task):
                if not waiter.done():
                    waiter.cancel()
        if task.done() and not task.cancelled():
            return task.result()
        reason = _describe(watchdog.exception()) if watchdog.done() and not watchdog.cancelled() \
            else _describe(self._error)
        raise MCPUnavailable(f"the connection to MCP server '{self.server.name}' ended: {reason}")

    async def _ping_until_failure(self) -> None:
        assert self.session is not None
        while True:
            await asyncio.sleep(PING_INTERVAL_SECONDS)
            async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                await self.session.send_ping()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    async def started(self) -> ClientSession:
        await self._ready.wait()
        if self.session is None or self.dead:
            raise MCPUnavailable(f"MCP server '{self.server.name}' is unavailable: {_describe(self._error)}")
        return self.session

    def close_soon(self) -> None:
        """Start closing (stopping a stdio server can take seconds); `closed` waits for the end."""
        self.dead = True
        self._closing.set()

    async def closed(self) -> None:
        self.close_soon()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._task), timeout=10)


class MCPToolSources:
    """One per worker: a connection per declared MCP server (reopened after a failure), and each server's
    tools, listed at most once per `list_ttl`."""

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
        """Stop every server process and close every session (a worker's shutdown)."""
        connections = [*self._connections.values(), *self._closing]
        self._connections, self._closing = {}, set()
        for connection in connections:
            await connection.closed()

    async def _listing(self, server: MCPServer) -> _Listing:
        key = server.cache_key()
        async with self._locks.setdefault(("list", *key), asyncio.Lock()):
            cached = self._listings.get(key)
            if cached is not None and cached.expires_at > self._clock():
                return cached
            connection = await self._connection(server)
            try:
                async with asyncio.timeout(server.connect_timeout.total_seconds()):
                    session = await connection.started()
                    listed = await connection.run(_list_all_tools(session))
                    context = await connection.run(_read_context(server, session))
            except Exception as exc:
                self._drop(connection)
                raise MCPUnavailable(f"MCP server '{server.name}' is unavailable: {_describe(exc)}") from exc
            self.listings_fetched += 1
            tools = [self._tool(server, t) for t in listed if server.offers(t.name)]
            log.info("mcp tools listed", server=server.name, tools=len(tools))
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
    async def open_session(self, server: MCPServer) -> AsyncIterator[ClientSession]:
        require("mcp", f"{MCP_FEATURE} (server '{server.name}')")
        import anyio  # the mcp SDK's (a worker without MCP servers does not load it)
        import httpx  # the mcp SDK's HTTP client (openai and anthropic use httpx2)
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        async with AsyncExitStack() as stack:
            if server.command is not None:
                env = {name: self._env[name] for name in server.env_from if name in self._env}
                params = StdioServerParameters(command=server.command, args=list(server.args),
                                               env={**env, **server.env} or None, cwd=server.cwd)
                read, write = await stack.enter_async_context(stdio_client(params))
            else:
                assert server.url is not None
                http = await stack.enter_async_context(httpx.AsyncClient(
                    headers=self._headers(server), follow_redirects=False,
                    timeout=httpx.Timeout(server.timeout.total_seconds(),
                                          connect=server.connect_timeout.total_seconds())))
                read, write, _ = await stack.enter_async_context(streamable_http_client(server.url, http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(server.connect_timeout.total_seconds()):
                await session.initialize()
            yield session

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
            input_schema=dict(listed.inputSchema or {"type": "object"}),
            metadata={"mcp_server": server.name, "mcp_tool": name},
        )

    async def call(self, server: MCPServer, tool_name: str, arguments: dict[str, Any], ctx: ToolContext) -> JsonValue:
        """Call one tool. A broken connection, a timeout or a malformed answer raises `MCPCallFailed` (retried
        per the tool's attempts, on a fresh connection); an `isError` result raises `ToolFailed`, which the
        model sees as the tool's error without a retry."""
        budget = server.timeout.total_seconds() * 0.9  # answer before the activity's own timeout fires
        connection = await self._connection(server)
        try:
            async with asyncio.timeout(budget):
                session = await connection.started()
                result = await connection.run(session.call_tool(
                    tool_name, arguments, read_timeout_seconds=timedelta(seconds=budget),
                    meta={"idempotency_key": ctx.idempotency_key}))
        except TimeoutError as exc:
            self._drop(connection)
            raise MCPCallFailed(f"MCP server '{server.name}' timed out during '{tool_name}' "
                                f"after {budget:g} s") from exc
        except Exception as exc:
            self._drop(connection)
            raise MCPCallFailed(f"MCP server '{server.name}' failed during '{tool_name}': {_describe(exc)}") from exc
        if result.isError:
            raise ToolFailed(_content_text(result.content) or f"MCP tool '{tool_name}' reported an error")
        if result.structuredContent is not None:
            return result.structuredContent
        return _content_text(result.content)


async def _list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    from mcp import types as mcp_types

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools


async def _read_context(server: MCPServer, session: ClientSession) -> list[str]:
    from mcp import types as mcp_types

    items: list[str] = []
    for uri in server.resources:
        read = await session.read_resource(AnyUrl(uri))
        texts = [c.text for c in read.contents if isinstance(c, mcp_types.TextResourceContents)]
        items.append(f"[{server.name} resource {uri}]\n" + "\n".join(texts))
    for name in server.prompts:
        prompt = await session.get_prompt(name)
        items.append(f"[{server.name} prompt {name}]\n" + _content_text([m.content for m in prompt.messages]))
    return items


def _content_text(blocks: list[Any]) -> str:
    from mcp import types as mcp_types

    parts: list[str] = []
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} {block.mimeType}, {len(block.data)} base64 characters]")
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
