"""The conversation section: one long conversation, its total history + payload bytes, per-turn latency.

Each turn is one `bench rounds=1` prompt (one tool round, two model calls), awaited; the latency of a turn
is send -> result. On this project's side the turns are sent to one conversation (`ConversationHandle.send`);
on the baseline's, each turn is a new `BaselineWorkflow` whose input carries the whole transcript so far, as
a hand-rolled loop would do it. At the end every history the conversation produced is fetched: each turn's
prompt's and, for this project, each conversation run's (continue-as-new starts new runs). Bytes are
`HistoryEvent.ByteSize()` summed, plus what the conversation put in the stores: its payloads kept outside
history (payload directory) and its history links (the file store, where earlier prompts are referenced from).
The question it answers: does a turn cost the same at turn 500 as at turn 10 (flat), or grow with the
conversation (each turn receiving copies of every earlier one)?

Turn 10 and turn 500 of one conversation are a minute or more apart, and on a shared machine its speed drifts
by more than 20 % in a minute. So the last turns also alternate with turns 6-15 of a second, fresh
conversation: the same early turns, measured in the same seconds as the late ones (`interleaved_ms`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from temporalio.client import Client

from bench.baseline import Message
from bench.config import log
from bench.scenario import Scenario
from bench.sides import BaselineSide
from durable_agent.client import AgentClient, ConversationHandle
from durable_agent.config.storage.files import encode_segment

WINDOW = 10  # turns averaged around the early and the late mark
TURN_LIMIT_S = 180.0  # a turn taking longer counts as a stall: the run stops there and says so


class _Stalled(Exception):
    pass


class _Conversation(Protocol):
    async def turn(self) -> tuple[float, str]:
        """One turn: send -> result in milliseconds, and the workflow id of the turn's prompt."""
        ...

    async def close(self) -> None: ...


class _Ours:
    def __init__(self, handle: ConversationHandle) -> None:
        self.handle = handle

    async def turn(self) -> tuple[float, str]:
        t0 = time.perf_counter()
        prompt = await self.handle.send(Scenario(rounds=1).text())
        try:
            async with asyncio.timeout(TURN_LIMIT_S):
                await self.handle.prompt_started(prompt.id, timeout=TURN_LIMIT_S)
                record = await prompt.result()
        except TimeoutError as exc:
            raise _Stalled from exc
        if record.state != "completed":
            raise RuntimeError(f"{prompt.id}: {record.state} {record.error}")
        return (time.perf_counter() - t0) * 1000, prompt.id

    async def close(self) -> None:
        await self.handle.close()


class _HandRolled:
    """The baseline's conversation: each turn a new workflow started with the transcript the last one returned."""

    def __init__(self, side: BaselineSide) -> None:
        self.side = side
        self.transcript: list[Message] = []

    async def turn(self) -> tuple[float, str]:
        t0 = time.perf_counter()
        run = await self.side.start(Scenario(rounds=1), history=self.transcript)
        try:
            async with asyncio.timeout(TURN_LIMIT_S):
                self.transcript = await run.wf.result()
        except TimeoutError as exc:
            raise _Stalled from exc
        return (time.perf_counter() - t0) * 1000, run.wf.id

    async def close(self) -> None:
        return None


async def _history_bytes(client: Client, workflow_id: str, run_id: str | None = None) -> int:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return sum(e.ByteSize() for e in history.events)


async def _run_turns(start: Callable[[], Awaitable[_Conversation]], client: Client, turns: int,
                     early: int, late: int) -> dict[str, Any]:
    """The turns of one conversation, the last WINDOW of them alternating with turns early-4 .. early+5 of a
    fresh one; a stalled turn ends the run."""
    conversation = await start()
    latencies: list[float] = []
    child_bytes: dict[int, int] = {}
    prompt_ids: list[str] = []
    stalled_at: int | None = None
    reference_from = max(1, turns - WINDOW + 1) if turns > early + WINDOW else None
    reference: _Conversation | None = None
    reference_ms: list[float] = []
    for turn in range(1, turns + 1):
        try:
            if turn == reference_from:
                reference = await start()
                for _ in range(early - WINDOW // 2):
                    await reference.turn()
            if reference is not None:
                reference_ms.append((await reference.turn())[0])
            elapsed, prompt_id = await conversation.turn()
        except _Stalled:
            stalled_at = turn
            log(f"  conversation stalled: turn {turn} did not finish within {TURN_LIMIT_S:g} s")
            break
        latencies.append(elapsed)
        prompt_ids.append(prompt_id)
        if turn in (early, late):
            child_bytes[turn] = await _history_bytes(client, prompt_id)
        if turn % 50 == 0:
            log(f"  conversation turn {turn}: {latencies[-1]:.0f} ms")
    if reference is not None:
        await reference.close()
    if stalled_at is None:
        await conversation.close()
    prompt_bytes = 0
    for prompt_id in prompt_ids:
        prompt_bytes += await _history_bytes(client, prompt_id)

    def around(mark: int) -> float:
        start_at = max(0, mark - WINDOW // 2)
        return statistics.median(latencies[start_at:start_at + WINDOW])

    late = min(late, len(latencies))
    return {
        "turns": turns, "turns_done": len(latencies), "stalled_at": stalled_at, "marks": [early, late],
        "prompt_history_bytes": prompt_bytes,
        "turn_ms": {early: around(early), late: around(late)},
        "interleaved_ms": ({early: statistics.median(reference_ms), late: statistics.median(latencies[-WINDOW:])}
                           if reference_ms and stalled_at is None else None),
        "reference_latencies_ms": reference_ms,
        "child_history_bytes": child_bytes,
        "latencies_ms": latencies,
    }


async def measure_conversation(agent: AgentClient, client: Client, *, turns: int, payload_dir: Path,
                               file_dir: Path | None = None, marks: tuple[int, int] = (10, 500)) -> dict[str, Any]:
    """This project's side. `file_dir`: the worker's file store (default: `files` beside `payload_dir`, the
    bench's layout)."""
    started: list[ConversationHandle] = []

    async def start() -> _Conversation:
        started.append(await agent.start_conversation(user_id="bench"))
        return _Ours(started[-1])

    out = await _run_turns(start, client, turns, marks[0], min(marks[1], turns))
    conversation = started[0]
    if out["stalled_at"] is not None:
        await client.get_workflow_handle(conversation.id).terminate("bench: the conversation stalled")
    conversation_bytes, runs = 0, 0
    async for execution in client.list_workflows(f"WorkflowId = '{conversation.id}'"):
        conversation_bytes += await _history_bytes(client, conversation.id, execution.run_id)
        runs += 1
    payload_bytes = _conversation_blobs(payload_dir, "wt/*/wi", conversation.id)
    link_bytes = _conversation_blobs(file_dir or payload_dir.parent / "files", "files/wi", conversation.id)
    return out | {
        "runs": runs, "conversation_history_bytes": conversation_bytes, "payload_store_bytes": payload_bytes,
        "history_link_bytes": link_bytes,
        "total_bytes": out["prompt_history_bytes"] + conversation_bytes + payload_bytes + link_bytes,
    }


async def measure_baseline_conversation(side: BaselineSide, *, turns: int,
                                        marks: tuple[int, int] = (10, 500)) -> dict[str, Any]:
    """The baseline's side: every turn's workflow history, nothing outside it."""

    async def start() -> _Conversation:
        return _HandRolled(side)

    out = await _run_turns(start, side.client, turns, marks[0], min(marks[1], turns))
    return out | {"runs": out["turns_done"], "total_bytes": out["prompt_history_bytes"]}


def _conversation_blobs(root: Path, kind: str, conversation_id: str) -> int:
    """Bytes of the blobs a store directory keeps for the conversation and its prompts (ids start with its id)."""
    folders = root.glob(f"v0/ns/{encode_segment('default')}/{kind}/{encode_segment(conversation_id)}*")
    return sum(p.stat().st_size for folder in folders for p in folder.rglob("*") if p.is_file())
