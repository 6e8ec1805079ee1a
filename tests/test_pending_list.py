"""`dagent pending`'s listing when a waiting prompt's worker is gone: the others are listed, that one is named
as not answering, and nothing waits for it (real dev server, in-process workers on their own task queues)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from cli.decisions import pending_rows
from tests.support.api import PLUGIN, web_model
from tests.support.workers import agent_worker


async def test_a_waiting_prompt_without_a_worker_is_named_not_waited_for(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as gone:
        orphan = await gone.start("pay bob 250", user_id="alice")
        await orphan.wait_until("waiting_for_approval")
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        live = await agent.start("pay carol 300", user_id="alice")
        await live.wait_until("waiting_for_approval")
        unanswered: list[str] = []
        rows = await pending_rows(agent, "alice", timeout=1.0, unanswered=unanswered)
        listed = {row.prompt_id for row in rows}
        assert live.id in listed and orphan.id not in listed
        assert orphan.id in unanswered and live.id not in unanswered
        assert [row.call.tool for row in rows if row.prompt_id == live.id] == ["payment.send"]
        await live.approve(next(row.call.tool_call_id for row in rows if row.prompt_id == live.id), by="alice")
