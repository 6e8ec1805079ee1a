"""Results are not held back by approvals: a call that finished while other calls of its response wait for
approval has its file, widget and plugin state in the record at once (query and `dagent show --json`), not
only once the last decision of the batch is in."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import FileOutput, Prompt, ToolOutput, WidgetOutput
from durable_agent.client import PromptHandle
from tests.support import batch_desk
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker


async def _until_finished_before_the_batch(handle: PromptHandle) -> Prompt:
    """The record once the three calls before the batch have finished and both payments wait."""
    for _ in range(400):
        prompt = await handle.get()
        calls = [o for o in prompt.output if isinstance(o, ToolOutput)]
        if prompt.state == "waiting_for_approval" and len(calls) == 5 and all(c.finished_at for c in calls[:3]) \
                and len(await handle.pending_approvals()) == 2:
            return prompt
        await asyncio.sleep(0.05)
    raise AssertionError(f"the calls before the batch never finished: {prompt}")


async def test_a_finished_calls_file_widget_and_state_are_recorded_while_its_batch_waits(
        dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        handle = await client.start("held: forecast, report and payments", user_id="ann")
        waiting = await _until_finished_before_the_batch(handle)
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
        shown = await asyncio.to_thread(subprocess.run, [*DAGENT_CMD, "show", handle.id, "--json"], env=env,
                                        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
        for call_id in [p.tool_call_id for p in await handle.pending_approvals()]:
            await handle.approve(call_id, by="alice", wait=True)
        done = await handle.result()

    kinds = [o.type for o in waiting.output]
    assert kinds[:6] == ["text", "tool", "tool", "tool", "tool", "tool"], kinds
    assert kinds[6:] == ["widget", "file"], kinds  # recorded while two payments still wait, in the model's order
    widget = next(o for o in waiting.output if isinstance(o, WidgetOutput))
    file = next(o for o in waiting.output if isinstance(o, FileOutput))
    assert widget.widget == "forecast" and widget.tool_call_id == "call_r1_0"
    assert file.name == "paris-trip.md" and file.tool_call_id == "call_r1_1"
    payments = waiting.plugin_state["desk"]["payments"]  # type: ignore[index]
    assert [(p["to"], p["amount"]) for p in payments] == [("Cafe", 50.0)]  # type: ignore[index]

    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["state"] == "waiting_for_approval"
    assert {o["type"] for o in record["output"]} >= {"file", "widget"}
    assert record["plugin_state"]["desk"]["payments"][0]["to"] == "Cafe"

    assert done.state == "completed"
    assert [o.type for o in done.output].count("file") == 1 and [o.type for o in done.output].count("widget") == 1
    assert done.output[6:8] == waiting.output[6:8]  # kept where they were, once
    assert done.plugin_state["desk"]["payments"][0]["to"] == "Cafe"  # type: ignore[index, call-overload]
