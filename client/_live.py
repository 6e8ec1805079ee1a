"""Following a prompt's live stream without writing to its history.

The prompt's stream (`temporalio.contrib.workflow_streams`) answers a read-only *query* with the items
from an offset on. Queries are never recorded in history, unlike the stream's long-poll *update*, so
watching a prompt adds nothing to it however many watch. A query is a billable action, though, so the poller
sends one only when the prompt's history grew (its length read with describe, which is not billed): a quiet or
waiting prompt costs its watchers no action. One `StreamPoller` per prompt and client fans the items out to
every local subscriber; each subscriber gets every event from its
own offset on, in order, once.

Streamed model text and tool progress are not events: the activities keep them in their heartbeat
details, and the poller reads them from the prompt's pending activities (describe, no history either).
They have no offset: a subscriber gets the latest of each (per model round, per tool call) as it changes.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
from collections.abc import AsyncIterator, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.models import TERMINAL_STATES
from durable_agent.workflows.names import (
    DELTAS_TOPIC,
    EVENTS_TOPIC,
    INVOKE_TOOL_ACTIVITY,
    MODEL_ROUND_ACTIVITY,
    PROGRESS_TOPIC,
    TOOL_THEN_MODEL_ACTIVITY,
)
from durable_agent.workflows.protocol import (
    StreamEvent,
    StreamingText,
    TextDelta,
    ToolProgress,
)

POLL_QUERY = "__temporal_workflow_stream_poll"
FASTEST_POLL = 0.05  # seconds between looks at the history's length while items keep coming
SLOWEST_POLL = 0.5  # ... backing off to this while the prompt is quiet (e.g. waiting for a person)
RETRY_PAUSE = 1.0  # after a transient failure (no worker yet, server restarting)
LIVE_DETAILS_POLL = 0.3  # how often streamed text and tool progress are read from pending activities
LIVE_ACTIVITIES = (MODEL_ROUND_ACTIVITY, INVOKE_TOOL_ACTIVITY, TOOL_THEN_MODEL_ACTIVITY)  # live details
SIDE_TOPICS = {DELTAS_TOPIC: TextDelta, PROGRESS_TOPIC: ToolProgress}
SideItem = TextDelta | ToolProgress


class PromptNotFound(LookupError):
    """No prompt with this id exists (or it was deleted by retention)."""

    def __init__(self, prompt_id: str) -> None:
        super().__init__(f"no prompt {prompt_id!r}")
        self.prompt_id = prompt_id


class StreamPoller:
    """Polls one prompt's stream query and keeps what it read, for every local subscriber."""

    def __init__(self, client: Client, workflow_id: str) -> None:
        self._client = client
        self._workflow_id = workflow_id
        self._offsets: list[int] = []
        self._items: list[tuple[str, Payload]] = []
        self._base = 0  # the first offset this poller holds (earlier ones are fetched on demand)
        self._next = 0  # the next offset to query
        self._done = False
        self._error: BaseException | None = None
        self._changed = asyncio.Condition()
        self._subscribers = 0
        self._side_subscribers = 0
        self._side: dict[str, tuple[int, str, SideItem]] = {}  # key -> (version, topic, latest item)
        self._side_version = 0
        self._task: asyncio.Task[None] | None = None
        self._side_task: asyncio.Task[None] | None = None

    async def subscribe(self, from_offset: int,
                        topics: Sequence[str]) -> AsyncIterator[tuple[int | None, str, Payload | SideItem]]:
        """Items `(offset, topic, payload)` of `topics` from `from_offset` until the prompt finishes; with
        the deltas/progress topics also `(None, topic, TextDelta | ToolProgress)` as they change."""
        self._subscribers += 1
        wants_side = any(topic in SIDE_TOPICS for topic in topics)
        if self._task is None:
            self._base = self._next = from_offset
            self._task = asyncio.create_task(self._run())
        if wants_side:
            self._side_subscribers += 1
            if self._side_task is None:
                self._side_task = asyncio.create_task(self._run_side())
        side_seen = 0
        try:
            if from_offset < self._base:
                await self._backfill(from_offset)
            position = from_offset
            while True:
                async with self._changed:
                    await self._changed.wait_for(
                        lambda at=position, seen=side_seen: self._next > at or self._done or self._error is not None
                        or (wants_side and self._side_version > seen))
                    start = bisect.bisect_left(self._offsets, position)
                    batch = list(zip(self._offsets[start:], self._items[start:], strict=True))
                    end, done, error = self._next, self._done, self._error
                    side = sorted(item for item in self._side.values() if item[0] > side_seen) if wants_side else []
                    side_seen = max([side_seen, *(version for version, _, _ in side)])
                for offset, (topic, payload) in batch:
                    if not topics or topic in topics:
                        yield offset, topic, payload
                for _, topic, item in side:
                    if topic in topics and not done:
                        yield None, topic, item
                position = max(position, end)
                if error is not None:
                    raise error
                if done:
                    return
        finally:
            self._subscribers -= 1
            self._side_subscribers -= 1 if wants_side else 0
            if self._side_subscribers == 0 and self._side_task is not None:
                self._side_task.cancel()
                self._side_task = None
            if self._subscribers == 0 and self._task is not None:
                self._task.cancel()
                _POLLERS.pop((id(self._client), self._workflow_id), None)

    async def _query(self, from_offset: int) -> PollResult:
        handle = self._client.get_workflow_handle(self._workflow_id)
        return await handle.query(POLL_QUERY, PollInput(topics=[], from_offset=from_offset), result_type=PollResult)

    async def _backfill(self, from_offset: int) -> None:
        """A late subscriber asked for offsets before what this poller holds: read them once."""
        offsets: list[int] = []
        items: list[tuple[str, Payload]] = []
        position = from_offset
        while position < self._base:
            result = await self._query(position)
            for wire in result.items:
                if wire.offset < self._base:
                    offsets.append(wire.offset)
                    items.append((wire.topic, Payload.FromString(base64.b64decode(wire.data))))
            if result.next_offset <= position:
                break
            position = result.next_offset
        async with self._changed:
            self._offsets[:0], self._items[:0] = offsets, items
            self._base = from_offset

    async def _run(self) -> None:
        """Query the stream only when the prompt's history grew since the last query: every item is published
        by a workflow task, and every workflow task adds events. A query is a billable action; the describe
        that reads the history's length is not, so a quiet or waiting prompt costs its watchers nothing."""
        pause = FASTEST_POLL
        queried_at_length = -1  # the history length the last successful query saw
        try:
            while True:
                length, closed = await self._history_length()
                if length is None:  # no answer (server restarting): keep trying
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                if length == queried_at_length:
                    if closed:  # a terminated or timed-out prompt publishes no final state
                        await self._finish()
                        return
                    pause = min(pause * 1.5, SLOWEST_POLL)
                    await asyncio.sleep(pause)
                    continue
                try:
                    result = await self._query(self._next)
                except RPCError as exc:
                    if exc.status == RPCStatusCode.NOT_FOUND:
                        raise PromptNotFound(self._workflow_id) from exc
                    await asyncio.sleep(RETRY_PAUSE)  # no worker yet: keep trying
                    continue
                queried_at_length = -1 if result.more_ready else length
                if await self._record(result):
                    await self._finish()
                    return
                pause = FASTEST_POLL
                if not result.more_ready:
                    await asyncio.sleep(pause)
        except Exception as exc:
            async with self._changed:
                self._error = exc
                self._changed.notify_all()

    async def _finish(self) -> None:
        async with self._changed:
            self._done = True
            self._changed.notify_all()

    async def _history_length(self) -> tuple[int | None, bool]:
        """The prompt's history length and whether it has closed (describe: not a billable action)."""
        try:
            description = await self._client.get_workflow_handle(self._workflow_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise PromptNotFound(self._workflow_id) from exc
            return None, False
        closed = description.status not in (None, WorkflowExecutionStatus.RUNNING)
        return description.raw_description.workflow_execution_info.history_length, closed

    async def _record(self, result: PollResult) -> bool:
        """Keep the new items; True once the prompt's terminal state event has been read."""
        converter = self._client.data_converter.payload_converter
        finished = False
        async with self._changed:
            for wire in result.items:
                if wire.offset < self._next:
                    continue  # already held (never yielded twice)
                payload = Payload.FromString(base64.b64decode(wire.data))
                self._offsets.append(wire.offset)
                self._items.append((wire.topic, payload))
                if wire.topic == EVENTS_TOPIC:
                    event = converter.from_payload(payload, StreamEvent)
                    finished = finished or (event.kind == "state_changed" and event.state in TERMINAL_STATES)
            self._next = max(self._next, result.next_offset)
            self._changed.notify_all()
        return finished and not result.more_ready

    async def _run_side(self) -> None:
        """Read streamed text and tool progress from the pending activities' heartbeat details."""
        converter = self._client.data_converter
        handle = self._client.get_workflow_handle(self._workflow_id)
        while not self._done and self._error is None:
            try:
                description = await handle.describe()
            except RPCError:
                await asyncio.sleep(RETRY_PAUSE)
                continue
            latest: dict[str, tuple[str, SideItem]] = {}
            for pending in description.raw_description.pending_activities:
                payloads = list(pending.heartbeat_details.payloads)
                kind = pending.activity_type.name
                if kind not in LIVE_ACTIVITIES or not payloads:
                    continue
                try:
                    raw = (await converter.decode(payloads[:1]))[0]
                    # `dagent.tool_then_model` reports its tool's progress, then its model's text.
                    tool_progress = kind == INVOKE_TOOL_ACTIVITY or (isinstance(raw, dict) and "tool_call_id" in raw)
                    topic = PROGRESS_TOPIC if tool_progress else DELTAS_TOPIC
                    if topic == DELTAS_TOPIC:
                        streaming = StreamingText.model_validate(raw)
                        for delta in (streaming.text, streaming.reasoning):
                            if delta is not None:
                                latest[f"{topic}/{pending.activity_id}/{delta.kind}"] = (topic, delta)
                    else:
                        latest[f"{topic}/{pending.activity_id}"] = (topic, ToolProgress.model_validate(raw))
                except Exception:  # a plain liveness beat, or details from another version
                    continue
            async with self._changed:
                for key in [key for key in self._side if key not in latest]:
                    del self._side[key]
                for key, (topic, item) in latest.items():
                    known = self._side.get(key)
                    if known is None or known[2] != item:
                        self._side_version += 1
                        self._side[key] = (self._side_version, topic, item)
                self._changed.notify_all()
            await asyncio.sleep(LIVE_DETAILS_POLL)

_POLLERS: dict[tuple[int, str], StreamPoller] = {}


def poller_for(client: Client, workflow_id: str) -> StreamPoller:
    """The one poller of this prompt in this process for this client (created on first use)."""
    key = (id(client), workflow_id)
    poller = _POLLERS.get(key)
    if poller is None:
        poller = _POLLERS[key] = StreamPoller(client, workflow_id)
    return poller
