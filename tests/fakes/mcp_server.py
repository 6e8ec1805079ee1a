"""A real MCP server for the tests, written with the SDK's FastMCP.

`python -m tests.fakes.mcp_server stdio` serves over stdio; `... http PORT` serves streamable HTTP on
127.0.0.1:PORT at /mcp. `MCP_FAKE_MARKERS` (a directory) makes `slow` leave a file when it starts, so a
test knows the call is in flight before it kills the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

server = FastMCP("fake-tools", host="127.0.0.1", log_level="WARNING")


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
def malformed() -> int:
    """Returns a value that breaks its own output schema."""
    return "not a number"  # type: ignore[return-value]


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
def whoami(ctx: Context) -> dict[str, str | None]:  # type: ignore[type-arg]
    """What the server saw of the caller: the authorization header, the idempotency key, an env var."""
    request = ctx.request_context.request
    meta = ctx.request_context.meta
    return {
        "authorization": request.headers.get("authorization") if request is not None else None,
        "idempotency_key": getattr(meta, "idempotency_key", None) if meta is not None else None,
        "fake_env": os.environ.get("MCP_FAKE_ENV"),
    }


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
        server.settings.port = int(sys.argv[2])
        server.run(transport="streamable-http")
    else:
        server.run(transport="stdio")
