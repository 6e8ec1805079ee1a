"""The conversation section: one long conversation, its total history + payload bytes, per-turn latency.

Each turn is one `bench rounds=1` prompt (one tool round, two model calls) sent with `ConversationHandle.send`
and awaited; the latency of a turn is send -> result. At the end every history the conversation produced
is fetched: each child prompt's and each conversation run's (continue-as-new starts new runs). Bytes are
`HistoryEvent.ByteSize()` summed, plus what the conversation put in the stores: its payloads kept outside
history (payload directory) and its history links (the file store, where earlier prompts are referenced from).
The question it answers: does a turn cost the same at turn 500 as at turn 10 (flat), or grow with the
conversation (each child prompt receiving copies of every earlier prompt)?

Turn 10 and turn 500 of one conversation are a minute or more apart, and on a shared machine its speed drifts
by more than 20 % in a minute. So the last turns also alternate with turns 6-15 of a second, fresh
conversation: the same early turns, measured in the same seconds as the late ones (`interleaved_ms`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.config import log
from bench.scenario import Scenario
from client import AgentClient, ConversationHandle, PromptHandle
from workers.blobstore import encode_segment

WINDOW = 10  # turns averaged around the early and the late mark
TURN_LIMIT_S = 180.0  # a turn taking longer counts as a stall: the run stops there and says so


class _Stalled(Exception):
    pass


async def _turn(conversation: ConversationHandle) -> tuple[float, PromptHandle]:
    """One turn, send -> result, in milliseconds."""
    t0 = time.perf_counter()
    prompt = await conversation.send(Scenario(rounds=1).text())
    try:
        async with asyncio.timeout(TURN_LIMIT_S):
            await conversation.prompt_started(prompt.id, timeout=TURN_LIMIT_S)
            record = await prompt.result()
    except TimeoutError as exc:
        raise _Stalled from exc
    elapsed = (time.perf_counter() - t0) * 1000
    if record.state != "completed":
        raise RuntimeError(f"{prompt.id}: {record.state} {record.error}")
    return elapsed, prompt


async def measure_conversation(agent: AgentClient, client: Client, *, turns: int, payload_dir: Path,
                               file_dir: Path | None = None, marks: tuple[int, int] = (10, 500)) -> dict[str, Any]:
    """`file_dir`: the worker's file store (default: `files` beside `payload_dir`, the bench's layout)."""
    early, late = marks[0], min(marks[1], turns)
    conversation = await agent.start_conversation(user_id="bench")
    latencies: list[float] = []
    child_bytes: dict[int, int] = {}
    prompt_ids: list[str] = []
    stalled_at: int | None = None
    # The fresh conversation's turns early-4 .. early+5 run between the long one's last WINDOW turns.
    reference_from = max(1, turns - WINDOW + 1) if turns > early + WINDOW else None
    reference: ConversationHandle | None = None
    reference_ms: list[float] = []
    for turn in range(1, turns + 1):
        try:
            if turn == reference_from:
                reference = await agent.start_conversation(user_id="bench")
                for _ in range(early - WINDOW // 2):
                    await _turn(reference)
            if reference is not None:
                reference_ms.append((await _turn(reference))[0])
            elapsed, prompt = await _turn(conversation)
        except _Stalled:
            stalled_at = turn
            log(f"  conversation stalled: turn {turn} did not finish within {TURN_LIMIT_S:g} s")
            break
        latencies.append(elapsed)
        prompt_ids.append(prompt.id)
        if turn in (early, late):
            history = await prompt.workflow.fetch_history()
            child_bytes[turn] = sum(e.ByteSize() for e in history.events)
        if turn % 50 == 0:
            log(f"  conversation turn {turn}: {latencies[-1]:.0f} ms")
    if reference is not None:
        await reference.close()
    if stalled_at is None:
        await conversation.close()
    else:
        await client.get_workflow_handle(conversation.id).terminate("bench: the conversation stalled")
    late = min(late, len(latencies))
    prompt_bytes = 0
    for prompt_id in prompt_ids:
        history = await client.get_workflow_handle(prompt_id).fetch_history()
        prompt_bytes += sum(e.ByteSize() for e in history.events)
    conversation_bytes, runs = 0, 0
    async for execution in client.list_workflows(f"WorkflowId = '{conversation.id}'"):
        history = await client.get_workflow_handle(conversation.id, run_id=execution.run_id).fetch_history()
        conversation_bytes += sum(e.ByteSize() for e in history.events)
        runs += 1
    payload_bytes = _conversation_blobs(payload_dir, "wt/*/wi", conversation.id)
    link_bytes = _conversation_blobs(file_dir or payload_dir.parent / "files", "files/wi", conversation.id)

    def around(mark: int) -> float:
        start = max(0, mark - WINDOW // 2)
        return statistics.median(latencies[start:start + WINDOW])

    return {
        "turns": turns, "turns_done": len(latencies), "stalled_at": stalled_at, "marks": [early, late], "runs": runs,
        "prompt_history_bytes": prompt_bytes, "conversation_history_bytes": conversation_bytes,
        "payload_store_bytes": payload_bytes, "history_link_bytes": link_bytes,
        "total_bytes": prompt_bytes + conversation_bytes + payload_bytes + link_bytes,
        "turn_ms": {early: around(early), late: around(late)},
        "interleaved_ms": ({early: statistics.median(reference_ms), late: statistics.median(latencies[-WINDOW:])}
                           if reference_ms and stalled_at is None else None),
        "reference_latencies_ms": reference_ms,
        "child_history_bytes": child_bytes,
        "latencies_ms": latencies,
    }


def _conversation_blobs(root: Path, kind: str, conversation_id: str) -> int:
    """Bytes of the blobs a store directory keeps for the conversation and its prompts (ids start with its id)."""
    folders = root.glob(f"v0/ns/{encode_segment('default')}/{kind}/{encode_segment(conversation_id)}*")
    return sum(p.stat().st_size for folder in folders for p in folder.rglob("*") if p.is_file())
