"""What every activity of a prompt shares: its logger bound to the activity, and heartbeats that carry the
latest live details (streamed text, tool progress) while a model or tool call runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.converter import PayloadCodec

from durable_agent.agent.background import running_alongside
from durable_agent.agent.logging import get_logger

log = get_logger("dagent.activities")

HEARTBEAT_INTERVAL_SECONDS = 0.5  # the worker forwards them at most every 0.5 s (workers.plugin.HEARTBEAT_THROTTLE)


def bound_log(**extra: Any) -> Any:
    info = activity.info()
    return log.bind(workflow_id=info.workflow_id, activity_id=info.activity_id,
                    activity=info.activity_type, attempt=info.attempt, **extra)


class LiveDetails:
    """The latest heartbeat details of an activity (streamed text, tool progress): every heartbeat carries
    them, so the periodic liveness beat never blanks what watchers and the Temporal UI show. `checkpoint`: a
    second detail every heartbeat carries too (what a retry of the activity must not do again)."""

    def __init__(self, checkpoint: dict[str, Any] | None = None) -> None:
        self.value: BaseModel | None = None
        self.checkpoint = checkpoint

    def set(self, value: BaseModel) -> None:
        self.value = value
        if not activity.info().is_local:
            activity.heartbeat(*self._details())

    def beat(self) -> None:
        activity.heartbeat(*self._details())

    def _details(self) -> tuple[Any, ...]:
        value = None if self.value is None else self.value.model_dump(mode="json")
        if self.checkpoint is not None:
            return value, self.checkpoint
        return () if value is None else (value,)


@contextlib.asynccontextmanager
async def heartbeating(live: LiveDetails, interval: float = HEARTBEAT_INTERVAL_SECONDS,
                      first_after: float | None = None) -> AsyncIterator[None]:
    """Heartbeat while a tool or a model call runs: a dead worker is noticed within the heartbeat timeout, and
    a cancelled prompt's cancellation reaches the activity. The first beat goes after one interval, or after
    `first_after` seconds: a call shorter than that sends none (one RPC less)."""

    if activity.info().is_local:  # local activities cannot heartbeat
        yield
        return

    async def beat() -> None:
        await asyncio.sleep(interval if first_after is None else first_after)
        while True:
            live.beat()
            await asyncio.sleep(interval)

    async with running_alongside(beat()):
        yield


def beat_interval(heartbeat_timeout: timedelta | None) -> float:
    """Heartbeat often enough for the call's heartbeat timeout (from the activity's info, not its input)."""
    if not heartbeat_timeout:
        return HEARTBEAT_INTERVAL_SECONDS
    return min(HEARTBEAT_INTERVAL_SECONDS, heartbeat_timeout.total_seconds() / 3)


def payload_codec() -> PayloadCodec | None:
    """The worker's payload codec (encryption), if it has one."""
    try:
        return activity.client().data_converter.payload_codec
    except RuntimeError:  # no client: an activity run outside a worker (ActivityEnvironment)
        return None

