"""A real MCP server for the tests, written with the MCP SDK 2.x's `MCPServer` (FastMCP's successor).

`python -m tests.fakes.mcp_server stdio` serves over stdio; `... http PORT` serves streamable HTTP on
127.0.0.1:PORT at /mcp. `MCP_FAKE_MARKERS` (a directory) makes `slow` leave a file when it starts and
`count` keep its tally there, so a test sees a call in flight and which server process answered.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fake-tools", log_level="WARNING")
_counts: dict[str, int] = {}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def count(name: str) -> dict[str, int]:
    """State this server process keeps: how many times `name` was counted here, and the process id."""
    _counts[name] = _counts.get(name, 0) + 1
    return {"count": _counts[name], "pid": os.getpid()}


@server.tool()
async def slow(seconds: float, tag: str) -> str:
    """Wait, then answer."""
    markers = os.environ.get("MCP_FAKE_MARKERS")
    if markers:
        Path(markers, f"{tag}.started").write_text(str(os.getpid()))  # noqa: ASYNC240
    await asyncio.sleep(seconds)
    return f"slept {seconds} ({tag})"


@server.tool()
def crash() -> str:
    """The server process dies in the middle of this call."""
    os._exit(3)


@server.tool()
def whoami(ctx: Context) -> dict[str, str | None]:
    """What the server saw of the caller: the authorization header, the idempotency key, an env var."""
    headers = ctx.headers
    meta = ctx.request_context.meta or {}
    return {
        "authorization": headers.get("authorization") if headers is not None else None,
        "idempotency_key": meta.get("idempotency_key"),
        "fake_env": os.environ.get("MCP_FAKE_ENV"),
    }


@server.tool()
def trace_context(ctx: Context) -> dict[str, str | None]:
    """The W3C trace context the client sent in `_meta` (a traced server continues that trace)."""
    meta = ctx.request_context.meta or {}
    return {"traceparent": meta.get("traceparent")}


@server.resource("note://readme")
def readme() -> str:
    """A note the agent should know."""
    return "The warehouse code is W-42."


@server.prompt()
def house_style() -> str:
    """How to answer."""
    return "Answer in one short sentence."


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run(transport="stdio")
