"""What every activity of a prompt shares: its logger bound to the activity, and the heartbeats of a model or
tool call that runs: liveness, the latest live details (streamed text, tool progress) and cancellation.

Every heartbeat that reaches the server is a billable action (Temporal Cloud counts each one), so a call
heartbeats only as often as each promise needs:

- liveness: one beat per `LIVENESS_SHARE` of the call's heartbeat timeout (the SDK's own throttle), so a dead
  worker is noticed within the timeout; a call shorter than that sends none;
- live details: with `live_every` (a worker streaming text to watchers, `DAGENT_STREAM_TEXT=1`), the latest
  text or progress goes every `live_every` seconds while it changes; otherwise it rides the liveness beats;
- cancellation: the reply to a heartbeat carries it, so instead of beating often the call long-polls its own
  workflow run for its close (`GetWorkflowExecutionHistory`, the read `handle.result()` makes: no action) from
  `CLOSE_WATCH_AFTER_SECONDS` on; a cancelled prompt closes at once, and one heartbeat then brings the
  cancellation (the run is gone) to the call."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import WorkflowHistoryEventFilterType
from temporalio.converter import PayloadCodec
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.background import running_alongside
from durable_agent.agent.logging import get_logger

log = get_logger("dagent.activities")

LIVENESS_SHARE = 0.8  # of the heartbeat timeout between liveness beats: the SDK's default heartbeat throttle
CLOSE_WATCH_AFTER_SECONDS = 0.5  # a call this old starts watching for its prompt's close (cancellation)
CLOSE_WATCH_RETRY_SECONDS = 5.0  # after a failed long poll (server restarting)


def bound_log(**extra: Any) -> Any:
    info = activity.info()
    return log.bind(workflow_id=info.workflow_id, activity_id=info.activity_id,
                    activity=info.activity_type, attempt=info.attempt, **extra)


@dataclass
class _Beats:
    """When this activity attempt last heartbeated (or started): shared by every `heartbeating` block of one
    attempt (`dagent.tool_then_model` runs a tool's, then a model's), so no gap between them outlasts the
    heartbeat timeout."""

    last: float


_BEATS: ContextVar[_Beats | None] = ContextVar("dagent_beats", default=None)


def _beats() -> _Beats:
    beats = _BEATS.get()
    if beats is None:  # set in the activity's own task: it lives as long as the attempt
        beats = _Beats(last=time.monotonic())
        _BEATS.set(beats)
    return beats


class LiveDetails:
    """The latest heartbeat details of an activity (streamed text, tool progress): every heartbeat carries
    them, so a liveness beat never blanks what watchers and the Temporal UI show. `checkpoint`: a second
    detail every heartbeat carries too (what a retry of the activity must not do again)."""

    def __init__(self, checkpoint: dict[str, Any] | None = None) -> None:
        self.value: BaseModel | None = None
        self.checkpoint = checkpoint
        self.changed = False  # set since the last heartbeat
        self.published = float("-inf")  # when the last heartbeat carrying a change went

    def set(self, value: BaseModel) -> None:
        """Keep `value` for the next heartbeat (no RPC here: `heartbeating` decides when one goes)."""
        self.value = value
        self.changed = True

    def beat(self) -> None:
        if self.changed:
            self.published = time.monotonic()
        self.changed = False
        _beats().last = time.monotonic()
        activity.heartbeat(*self._details())

    def _details(self) -> tuple[Any, ...]:
        value = None if self.value is None else self.value.model_dump(mode="json")
        if self.checkpoint is not None:
            return value, self.checkpoint
        return () if value is None else (value,)


@contextlib.asynccontextmanager
async def heartbeating(live: LiveDetails, live_every: float | None = None) -> AsyncIterator[None]:
    """Heartbeat while a tool or a model call runs, as rarely as the module docstring says: a dead worker is
    noticed within the heartbeat timeout, live details reach watchers every `live_every` seconds (or with the
    liveness beats), and a cancelled prompt's cancellation reaches the call within about a second."""
    if activity.info().is_local:  # local activities cannot heartbeat
        yield
        return
    beats, timeout = _beats(), activity.info().heartbeat_timeout
    interval = timeout.total_seconds() * LIVENESS_SHARE if timeout else None  # between liveness beats

    async def beat() -> None:
        while True:
            now = time.monotonic()
            due = beats.last + interval if interval else float("inf")
            if live_every is not None and live.changed:
                due = min(due, live.published + live_every)
            if due <= now:
                live.beat()
                continue
            if due == float("inf") and live_every is None:
                await asyncio.Event().wait()  # no heartbeat timeout and no live details: only `on_close` beats
            # with live details on, look again every `live_every` (they may change meanwhile)
            await asyncio.sleep(min(due - now, live_every or due - now))

    async def on_close() -> None:
        await asyncio.sleep(CLOSE_WATCH_AFTER_SECONDS)
        await _run_closed()
        live.beat()  # its reply brings the cancellation (the run is gone): the SDK cancels this call

    async with running_alongside(beat()), running_alongside(on_close()):
        yield


async def _run_closed() -> None:
    """Return once this activity's workflow run has closed (completed, cancelled, failed, terminated)."""
    info = activity.info()
    try:
        client = activity.client()
    except RuntimeError:  # no client: an activity run outside a worker (ActivityEnvironment)
        await asyncio.Event().wait()
    handle = client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    while True:
        try:
            async for _ in handle.fetch_history_events(wait_new_event=True, skip_archival=True,
                                                       event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT):
                return
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return
            log.debug("watching the prompt's close failed, trying again", error=str(exc)[:200])
            await asyncio.sleep(CLOSE_WATCH_RETRY_SECONDS)


def payload_codec() -> PayloadCodec | None:
    try:
        return activity.client().data_converter.payload_codec
    except RuntimeError:  # no client: an activity run outside a worker (ActivityEnvironment)
        return None
