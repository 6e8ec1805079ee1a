"""Graceful drain: a worker told to stop (SIGTERM, SIGINT) stops polling and lets its running tools and model
calls finish before it exits, instead of cancelling them and having another worker run them again.

Temporal does the drain itself when a `Worker` has a `graceful_shutdown_timeout`: `shutdown()` stops the pollers
at once (no new work reaches this worker; other workers take it), keeps heartbeating the activities that are
running, reports their results, and cancels whatever still runs when the period ends (those calls are retried
on another worker, as after a crash). `dagent worker` runs several `Worker`s (workflows and tools, model
queues); `drain` shuts them all down together, so one period covers the whole process, not one per worker.
A second signal during the drain stops the process at once (what a SIGKILL after `stop_grace_period` does).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from datetime import timedelta

from temporalio.worker import Worker

from durable_agent.agent.logging import get_logger
from durable_agent.config.durations import format_duration

__all__ = ["FORCED_EXIT_CODE", "StopSignals", "drain"]

log = get_logger(__name__)
FORCED_EXIT_CODE = 130  # a second signal during the drain: stop now, like Ctrl-C twice


async def drain(workers: Sequence[Worker], grace: timedelta) -> None:
    """Shut down every worker at once: stop polling, let running activities finish for up to `grace` each."""
    log.info("worker draining", workers=len(workers), grace=format_duration(grace))
    await asyncio.gather(*(worker.shutdown() for worker in workers))
    log.info("worker drained")


class StopSignals:
    """SIGTERM and SIGINT on the running loop: the first sets `stopping` (drain), a second exits at once."""

    def __init__(self, on_force: Callable[[], None] | None = None) -> None:
        self.stopping = asyncio.Event()
        self._on_force = on_force
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._received)

    def _received(self) -> None:
        if not self.stopping.is_set():
            self.stopping.set()
            return
        if self._on_force is not None:
            self._on_force()
        os._exit(FORCED_EXIT_CODE)  # running calls are retried elsewhere after their heartbeat timeout

    async def wait(self) -> None:
        await self.stopping.wait()
