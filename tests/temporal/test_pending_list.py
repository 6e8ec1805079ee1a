"""`AgentClient.pending` (`dagent pending`, the API's inbox) when a waiting prompt that has to be asked (a call
too large for its memo: the list asks the prompt for its detail) has no worker: its call is listed without the
detail and nothing waits for it (real dev server, in-process workers on their own task queues). Prompts whose
memo says everything are listed without any worker: tests/temporal/test_pending_visibility.py."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from tests.support.api import PLUGIN, web_model
from tests.support.workers import agent_worker


async def test_a_waiting_prompt_without_a_worker_is_named_not_waited_for(dev_env: WorkflowEnvironment) -> None:
    """A prompt whose call's detail is too large for its memo, and whose worker is gone, is asked for at most
    `timeout`: its call is listed without the detail. The list covers its own deployment's task queue only."""
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as gone:
        orphan = await gone.start(f"pay {'b' * 4200} 250", user_id="alice")
        await orphan.wait_until("waiting_for_approval")
    found = await gone.pending(user_id="alice", timeout=1.0)  # its queue has no worker now
    [row] = [row for row in found.rows if row.prompt_id == orphan.id]
    assert (row.tool, row.input) == ("payment.send", None) and found.unanswered == []
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        live = await agent.start("pay carol 300", user_id="alice")
        await live.wait_until("waiting_for_approval")
        found = await agent.pending(user_id="alice", timeout=1.0)
        rows = found.rows
        listed = {row.prompt_id for row in rows}
        assert live.id in listed and orphan.id not in listed  # another deployment's queue
        assert found.unanswered == []
        assert [row.tool for row in rows if row.prompt_id == live.id] == ["payment.send"]
        await live.approve(next(row.tool_call_id for row in rows if row.prompt_id == live.id), by="alice")


async def test_a_user_id_with_a_quote_is_quoted_in_the_visibility_queries(dev_env: WorkflowEnvironment) -> None:
    """User ids reach the list queries as quoted literals: a quote in one neither breaks nor widens the query."""
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        handle = await agent.start("pay dave 400", user_id="o'brien")
        await handle.wait_until("waiting_for_approval")
        found = await agent.pending(user_id="o'brien")
        assert [row.prompt_id for row in found.rows] == [handle.id]
        assert [w.prompt_id for w in await agent.waiting_prompts(user_id="o' OR UserId != '")] == []
        listed = await agent.list_prompts(user_id="o'brien")
        assert [p.prompt_id for p in listed] == [handle.id]
        await handle.approve(found.rows[0].tool_call_id, by="o'brien")
