"""Watching writes nothing: a prompt's history with 0 and with 5 live watchers (and token streaming).

    .venv/bin/python -m bench.watchers [--watchers 5]

Starts its own dev server (``DevServer``) and an in-process worker that streams model text, runs the same
prompt (streamed text, a tool that reports progress, an approval, a streamed final answer) once with no
watcher and once with N watchers following it live (``PromptHandle.live()``/``events()``, attached at
different moments and offsets), and prints the history events and bytes of each run and their ratio
(target: 1.00). Bytes = sum of ``HistoryEvent.ByteSize()`` over ``fetch_history()``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall
from durable_agent.agent.models import ApprovalRequest, ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import TextSink
from durable_agent.agent.providers.scripted import ScriptedModel, split_words, text
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import create_worker
from durable_agent.workflows.names import EVENTS_TOPIC
from durable_agent.workflows.protocol import StreamEvent, TextDelta, ToolProgress


class Step(BaseModel):
    city: str


class Gates:
    """Lets a test hold the tool and the streamed text until a watcher has seen them (no timing guesses).
    Off in the benchmark and in the unwatched run; a gate never holds longer than `HOLD_AT_MOST` seconds."""

    HOLD_AT_MOST = 30.0
    enabled = False
    progress_seen = asyncio.Event()
    text_seen = asyncio.Event()

    @classmethod
    async def hold(cls, event: asyncio.Event) -> None:
        if cls.enabled:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), cls.HOLD_AT_MOST)


@tool("watch.forecast")
async def forecast(args: Step, ctx: ToolContext) -> str:
    """A slow lookup that reports progress."""
    for part in range(3):
        ctx.report_progress(f"asking station {part + 1}/3", (part + 1) / 3)
        await asyncio.sleep(0.2)
    await Gates.hold(Gates.progress_seen)
    return f"{args.city}: 18°C, light rain"


@tool("watch.pay", approval=Approval(reason="Payments need a person."))
async def pay(args: Step, ctx: ToolContext) -> str:
    """Pay a deposit (needs approval)."""
    return f"deposit paid in {args.city}"


PLUGIN = Plugin("watching", tools=[forecast, pay])
ANSWER = ("Paris will be 18°C with light rain, so pack an umbrella. The hotel deposit is paid and your "
          "report is ready; enjoy the trip and the museums while it rains.")


def _script(request: ModelRequest) -> ModelResponse:
    if request.round == 1:
        return ModelResponse(text="Let me check the weather in Paris first.",
                             tool_calls=[ModelToolCall(id="c1", tool="watch.forecast", arguments={"city": "Paris"})])
    if request.round == 2:
        return ModelResponse(text="Now the deposit, which needs your approval.",
                             tool_calls=[ModelToolCall(id="c2", tool="watch.pay", arguments={"city": "Paris"})])
    return text(ANSWER)


class PacedModel(ScriptedModel):
    """Streams word by word at a reading pace, as a real model does; in `hold_round` it holds after the
    first word until a watcher has seen streamed text (when the gates are on)."""

    def __init__(self, *args: Any, hold_round: int = 3, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold_round = hold_round

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse:
        response = await self.complete(request)  # served and recorded as a plain call
        for index, chunk in enumerate(split_words(response.text or "")):
            await on_text(chunk)
            await asyncio.sleep(0.02)
            if index == 0 and request.round == self.hold_round:
                await Gates.hold(Gates.text_seen)
        return response


def _without_times(message: Message) -> Message:
    """A copy with every timestamp cleared: their varint sizes differ from run to run by a byte or two."""
    copy = type(message)()
    copy.CopyFrom(message)
    stack = [copy]
    while stack:
        current = stack.pop()
        for descriptor, value in current.ListFields():
            if descriptor.message_type is None:
                continue
            if descriptor.message_type.full_name == "google.protobuf.Timestamp":
                current.ClearField(descriptor.name)
            elif isinstance(value, Message):
                stack.append(value)
            else:  # a repeated field or a map of messages
                stack.extend(v for v in (value.values() if hasattr(value, "values") else value)
                             if isinstance(v, Message))
    return copy


@dataclass
class Run:
    events: int
    bytes: int
    bytes_without_times: int
    event_types: list[int]
    seen: list[list[int]] = field(default_factory=list)  # per watcher: the event offsets it received
    deltas: list[list[TextDelta]] = field(default_factory=list)  # per live watcher: the streamed text it saw
    progress: list[list[str]] = field(default_factory=list)  # per live watcher: tool progress messages it saw


async def _approve_when_waiting(handle: PromptHandle) -> None:
    prompt = await handle.wait_until("waiting_for_approval", poll_interval=0.1)
    pending = next(o for o in prompt.output if isinstance(o, ToolOutput) and isinstance(o.result, ApprovalRequest))
    await handle.approve(pending.id, by="bench")


async def _watch(handle: PromptHandle, *, live: bool, from_offset: int,
                 delay: float) -> tuple[list[int], list[TextDelta], list[str]]:
    await asyncio.sleep(delay)
    offsets: list[int] = []
    streamed: list[TextDelta] = []
    progress: list[str] = []
    source = handle.live(from_offset) if live else handle.events(from_offset)
    async for offset, item in source:
        if isinstance(item, TextDelta):
            if item.round == 3:
                Gates.text_seen.set()
            streamed.append(item)
        elif isinstance(item, ToolProgress):
            Gates.progress_seen.set()
            progress.append(item.message)
        else:
            assert isinstance(item, StreamEvent) and offset is not None
            offsets.append(offset)
    return offsets, streamed, progress


async def _watch_with_updates(handle: PromptHandle) -> tuple[list[int], list[TextDelta], list[str]]:
    """The way watchers followed a prompt before (the stream's long-poll update): the baseline."""
    stream = WorkflowStreamClient.create(handle.workflow._client, handle.id)
    offsets = [item.offset async for item in stream.subscribe([EVENTS_TOPIC], 0, result_type=StreamEvent,
                                                              poll_cooldown=timedelta(milliseconds=50))]
    return offsets, [], []


async def run_once(agent: AgentClient, watchers: int, *, baseline: bool = False) -> Run:
    handle = await agent.start("Plan my Paris trip", user_id="bench", prompt_id=f"prompt-watch-{uuid.uuid4().hex[:8]}")
    plans = [(i % 2 == 0, 0 if i < 3 else 2, 0.05 * i) for i in range(watchers)]  # live/events, offset, delay
    watching = [asyncio.create_task(_watch_with_updates(handle) if baseline else
                                    _watch(handle, live=live, from_offset=offset, delay=delay))
                for live, offset, delay in plans]
    await _approve_when_waiting(handle)
    prompt = await handle.result()
    assert prompt.state == "completed", prompt.error
    results = await asyncio.gather(*watching)
    history = await handle.workflow.fetch_history()
    return Run(events=len(history.events), bytes=sum(e.ByteSize() for e in history.events),
               bytes_without_times=sum(_without_times(e).ByteSize() for e in history.events),
               event_types=[e.event_type for e in history.events],
               seen=[offsets for offsets, _, _ in results],
               deltas=[streamed for (live, _, _), (_, streamed, _) in zip(plans, results, strict=True) if live],
               progress=[messages for (live, _, _), (_, _, messages) in zip(plans, results, strict=True) if live])


def streaming_runtime() -> AgentRuntime:
    return AgentRuntime(plugins=[PLUGIN], providers={"normal": PacedModel(_script)}, stream_text=True)


async def compare(client: Client, settings: Settings, watchers: int, *, gates: bool = False) -> tuple[Run, Run]:
    async with create_worker(client, streaming_runtime(), task_queue=settings.task_queue):
        agent = AgentClient(client, settings)
        unwatched = await run_once(agent, 0)
        Gates.enabled = gates
        Gates.progress_seen.clear()
        Gates.text_seen.clear()
        try:
            return unwatched, await run_once(agent, watchers)
        finally:
            Gates.enabled = False


async def main_async(watchers: int) -> None:
    from durable_agent.cli.devserver import DevServer
    from durable_agent.workers.worker import connect

    with tempfile.TemporaryDirectory() as tmp:
        async with DevServer(db_file=Path(tmp) / "t.db") as server:
            settings = Settings(temporal_address=server.address, task_queue="bench-watchers",
                                payload_dir=f"{tmp}/payloads", file_dir=f"{tmp}/files")
            client = await connect(settings)
            unwatched, watched = await compare(client, settings, watchers)
            async with create_worker(client, streaming_runtime(), task_queue=settings.task_queue):
                polled = await run_once(AgentClient(client, settings), watchers, baseline=True)
    print(f"history of one prompt (streamed text, progress, approval), 0 vs {watchers} watchers:")
    print(f"  events: {unwatched.events} vs {watched.events}  ratio {watched.events / unwatched.events:.2f}")
    print(f"  bytes:  {unwatched.bytes} vs {watched.bytes}  ratio {watched.bytes / unwatched.bytes:.3f}"
          f"  (without timestamps: {unwatched.bytes_without_times} vs {watched.bytes_without_times})")
    print(f"  baseline, {watchers} watchers on the stream's long-poll update (how watching worked before): "
          f"{polled.events} events ({polled.events / unwatched.events:.2f}x), {polled.bytes} bytes "
          f"({polled.bytes / unwatched.bytes:.2f}x)")
    print(f"  every watcher got every event offset once, in order: "
          f"{all(s == list(range(s[0], s[0] + len(s))) for s in watched.seen if s)}")
    print(f"  live watchers saw streamed text {[len(d) for d in watched.deltas]} times and tool progress "
          f"{[len(p) for p in watched.progress]} times")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=5)
    asyncio.run(main_async(parser.parse_args().watchers))
    sys.stdout.flush()
    os._exit(0)  # the SDK can crash at interpreter exit (sdk-python#300)


if __name__ == "__main__":
    main()
