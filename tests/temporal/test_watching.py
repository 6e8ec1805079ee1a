"""Watching a prompt writes nothing to its history, and every watcher still gets every event once, in order."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import WorkflowEnvironment

from bench.watchers import ANSWER, compare, streaming_runtime
from durable_agent.agent.models import Prompt
from durable_agent.client import AgentClient, PromptNotFound
from durable_agent.client._live import _POLLERS
from durable_agent.workers.worker import create_worker
from durable_agent.workflows.protocol import TextDelta
from tests.support.workers import TEST_SETTINGS


async def test_five_watchers_and_token_streaming_leave_the_history_as_unwatched(dev_env: WorkflowEnvironment) -> None:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    unwatched, watched = await compare(dev_env.client, settings, watchers=5, gates=True)
    assert watched.events == unwatched.events
    assert watched.event_types == unwatched.event_types
    assert watched.bytes_without_times == unwatched.bytes_without_times  # timestamps' varints vary by a byte
    assert len(watched.seen) == 5
    for offsets in watched.seen:
        assert offsets and offsets == sorted(set(offsets))  # no duplicate, in order
    full = max(watched.seen, key=len)
    assert full == list(range(full[-1] + 1))  # a watcher from 0 gets every offset: no gap
    assert all(s == full[full.index(s[0]):] for s in watched.seen)  # later watchers get exactly the rest
    # Streamed text and tool progress reached the live watchers (the gates held until one had seen them).
    assert any(d.round == 3 for deltas in watched.deltas for d in deltas)
    for deltas in watched.deltas:
        for delta in deltas:
            round_text = ROUND_TEXTS[delta.round - 1]
            assert round_text[delta.offset:delta.offset + len(delta.text)] == delta.text
    assert any(watched.progress)
    assert all(m.startswith("asking station ") for messages in watched.progress for m in messages)


ROUND_TEXTS = ["Let me check the weather in Paris first.", "Now the deposit, which needs your approval.", ANSWER]


async def test_watchers_of_one_prompt_share_one_poller(dev_env: WorkflowEnvironment) -> None:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    async with create_worker(dev_env.client, streaming_runtime(), task_queue=settings.task_queue):
        agent = AgentClient(dev_env.client, settings)
        handle = await agent.start("Plan my Paris trip")
        watchers = [asyncio.create_task(_count(agent, handle.id)) for _ in range(3)]
        await handle.wait_until("waiting_for_approval")
        pollers = [key for key in _POLLERS if key[1] == handle.id]
        assert len(pollers) == 1
        prompt: Prompt = await handle.get()
        await handle.approve(prompt.output[-1].id, by="tester")  # type: ignore[union-attr]
        counts = await asyncio.gather(*watchers)
    assert len(set(counts)) == 1 and counts[0] > 5
    assert not [key for key in _POLLERS if key[1] == handle.id]  # gone with its last watcher


async def _count(agent: AgentClient, prompt_id: str) -> int:
    return len([offset async for offset, _ in agent.prompt(prompt_id).live()])


async def test_watching_an_unknown_prompt_says_so(dev_env: WorkflowEnvironment) -> None:
    agent = AgentClient(dev_env.client, TEST_SETTINGS)
    try:
        async for _ in agent.prompt("prompt-nope").events():
            pass
    except PromptNotFound as exc:
        assert str(exc) == "no prompt 'prompt-nope'"
    else:
        raise AssertionError("expected PromptNotFound")


def test_a_delta_shows_only_what_is_past_the_text_already_shown() -> None:
    delta = TextDelta(round=1, attempt=1, offset=5, text="world!")
    assert (delta.past(0), delta.past(5), delta.past(8), delta.past(11), delta.past(20)) == \
        ("world!", "world!", "ld!", "", "")
