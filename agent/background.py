"""Work that runs beside a block of code and stops with it (heartbeats, a readiness watcher)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running_alongside(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `work` as a task while the block runs; cancel it when the block ends, however it ends."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
