"""`AgentClient.pending` (`dagent pending`, `GET /approvals`, the inbox) lists waiting calls from visibility:
each prompt keeps its waiting calls in its memo, rewritten as calls start and stop waiting, and one
`list_workflows` query reads them, so the list needs no worker and asks no workflow. A stale row (visibility
is eventually consistent) is refused when someone decides it. Real dev server, in-process workers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.client import DecisionRefused, PendingList, PromptHandle
from durable_agent.workflows.pending_memo import DETAIL_BYTES, PENDING_MEMO_KEY
from tests.support.api import PLUGIN, web_model
from tests.support.workers import agent_worker

T = TypeVar("T")


async def _eventually(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], seconds: float = 15.0) -> T:
    """Visibility is eventually consistent: read until `ok` (the last read, failing, once time is up)."""
    deadline = time.monotonic() + seconds
    while True:
        value = await read()
        if ok(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.1)


def _rows_of(found: PendingList, prompt: PromptHandle) -> list[str]:
    return [row.tool_call_id for row in found.rows if row.prompt_id == prompt.id]


def _two_payments(to_first: str = "ann") -> ScriptedModel:
    """One response with two payments that both need approval (a batch), then a summary."""
    def script(request: ModelRequest) -> ModelResponse:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return text("paid what was approved")
        return tool_calls(("payment.send", {"to": to_first, "amount": 200}),
                          ("payment.send", {"to": "ben", "amount": 300}))
    return ScriptedModel(script)


async def _memo(prompt: PromptHandle) -> object:
    return await (await prompt.workflow.describe()).memo_value(PENDING_MEMO_KEY, None)


async def test_waiting_calls_are_listed_with_their_detail_when_no_worker_runs(dev_env: WorkflowEnvironment) -> None:
    user = f"vis-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        prompt = await agent.start("pay bob 250", user_id=user)
        await prompt.wait_until("waiting_for_approval")
        [expected] = await prompt.pending_approvals()
    # The worker is gone: a query could not be answered, so whatever is listed came from visibility.
    started = time.monotonic()
    found = await _eventually(lambda: agent.pending(user_id=user, timeout=5.0), lambda f: bool(f.rows))
    assert time.monotonic() - started < 5.0
    assert found.unanswered == []
    [row] = found.rows
    assert (row.prompt_id, row.user_id) == (prompt.id, user)
    assert row == expected  # tool, call id, reason, approvers, since, input and its schema
    assert row.reason == "Sending $250 requires approval." and row.input == {"to": "bob", "amount": 250}
    assert row.input_schema is not None and "amount" in row.input_schema["properties"]  # type: ignore[operator]
    await prompt.workflow.terminate(reason="test over")


async def test_the_memo_follows_calls_as_they_start_and_stop_waiting(dev_env: WorkflowEnvironment) -> None:
    user = f"vis-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=_two_payments()) as agent:
        prompt = await agent.start("pay two people", user_id=user)
        both = await _eventually(lambda: agent.pending(user_id=user), lambda f: len(_rows_of(f, prompt)) == 2)
        first, second = _rows_of(both, prompt)
        assert [row.input for row in both.rows] == [{"to": "ann", "amount": 200}, {"to": "ben", "amount": 300}]

        await prompt.approve(first, by=user, wait=True)
        one = await _eventually(lambda: agent.pending(user_id=user), lambda f: _rows_of(f, prompt) == [second])
        assert _rows_of(one, prompt) == [second]
        # A stale row (the first list still shows the approved call): deciding it is refused by the workflow.
        with pytest.raises(DecisionRefused) as refused:
            await prompt.approve(first, by=user, wait=True)
        assert refused.value.kind == "already-decided"

        await prompt.reject(second, by=user, reason="not ben", wait=True)
        done = await prompt.result()
        assert done.state == "completed"
        none = await _eventually(lambda: agent.pending(user_id=user), lambda f: not _rows_of(f, prompt))
        assert _rows_of(none, prompt) == []
        assert await _memo(prompt) == {}
        # One memo write per change: the batch's two calls at once, then each decision.
        events = (await prompt.workflow.fetch_history()).events
        upserts = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED]
        assert len(upserts) == 3


async def test_a_call_too_large_for_the_memo_is_listed_with_the_detail_asked_for(dev_env: WorkflowEnvironment) -> None:
    user = f"vis-{uuid.uuid4().hex[:8]}"
    long_name = "z" * (DETAIL_BYTES + 100)
    model = ScriptedModel(lambda request: text("ok") if any(isinstance(m, ToolResultMessage) for m in request.messages)
                          else tool_calls(("payment.send", {"to": long_name, "amount": 500})))
    async with agent_worker(dev_env, plugins=[PLUGIN], model=model) as agent:
        prompt = await agent.start("pay a long name", user_id=user)
        found = await _eventually(lambda: agent.pending(user_id=user), lambda f: bool(_rows_of(f, prompt)))
        [row] = found.rows
        assert row.input == {"to": long_name, "amount": 500} and row.input_schema is not None
        memo = await _memo(prompt)
        assert isinstance(memo, dict) and memo["detail_omitted"] == [row.tool_call_id]
        assert memo["calls"][0]["input"] is None and memo["calls"][0]["tool"] == "payment.send"
        await prompt.approve(row.tool_call_id, by=user)
        assert (await prompt.result()).state == "completed"


async def test_the_whole_list_reads_every_page(dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of two prompts: the whole list follows the page tokens to the end and lists every waiting prompt
    once; one page (`limit`) says how many there are and where the next page starts."""
    from durable_agent.client import pending

    monkeypatch.setattr(pending, "PAGE_SIZE", 2)
    user = f"vis-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        prompts = [await agent.start(f"pay bob {250 + i}", user_id=user) for i in range(5)]
        for prompt in prompts:
            await prompt.wait_until("waiting_for_approval")
        found = await _eventually(lambda: agent.pending(user_id=user), lambda f: len(f.rows) == 5)
        paged = await agent.pending(user_id=user, limit=2)
    assert sorted(row.prompt_id for row in found.rows) == sorted(p.id for p in prompts)
    assert sorted(row.input["amount"] for row in found.rows) == [250, 251, 252, 253, 254]  # type: ignore[index]
    assert len(paged.rows) == 2 and paged.total == 5 and paged.next_cursor is not None
    for prompt in prompts:
        await prompt.workflow.terminate(reason="test over")
