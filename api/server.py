"""Running the app under uvicorn: `dagent api`, and an in-process server for tests and the quick start."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import ASGIApp


@contextlib.asynccontextmanager
async def serve_in_background(app: ASGIApp, *, host: str = "127.0.0.1", port: int | None = None
                              ) -> AsyncIterator[str]:
    """Serve `app` on a real socket in this event loop; yields its base URL and stops it afterwards. Without a
    `port` the system picks a free one when the socket is bound (no window in which another process takes it)."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port or 0, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the API server stopped while starting")
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
