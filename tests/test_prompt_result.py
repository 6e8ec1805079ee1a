"""`PromptHandle.result()` of a failed prompt: the record comes with the workflow's failure (patch
`failure-carries-record`), so no worker has to replay the closed workflow to answer a query; with
`raise_on_failure=True` it raises `PromptFailedError` carrying that record."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.errors import PromptFailedError
from durable_agent.agent.models import TextOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text
from tests.support.workers import agent_worker

SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


def _never_json() -> ScriptedModel:
    return ScriptedModel(lambda request: text("no JSON here"))


async def test_a_failed_prompts_record_comes_with_its_failure(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=_never_json()) as client:
        handle = await client.start("sum it", output_schema=SCHEMA, output_retries=0)
        with pytest.raises(Exception):  # noqa: B017  # the workflow failed (the raw Temporal handle says so)
            await handle.workflow.result()
    # No worker runs now: a query of the closed workflow would wait for one; the failure carries the record.
    prompt = await asyncio.wait_for(handle.result(), 10)
    assert prompt.state == "failed" and prompt.error is not None and "output schema" in prompt.error
    assert [o.text for o in prompt.output if isinstance(o, TextOutput)] == ["no JSON here"]
    with pytest.raises(PromptFailedError, match="output schema") as failed:
        await asyncio.wait_for(handle.result(raise_on_failure=True), 10)
    assert failed.value.prompt == prompt


async def test_a_completed_prompt_is_returned_either_way(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=ScriptedModel([text("done")])) as client:
        handle = await client.start("hi")
        prompt = await handle.result(raise_on_failure=True)
    assert prompt.state == "completed"
