"""Bad input of every kind gets a defined outcome: nothing stuck, nothing silently lost."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall
from durable_agent.agent.models import ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin, PrepareContext
from durable_agent.agent.providers.base import RetryableModelError
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.cli.devserver.binaries import temporal_cli_path
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.workers import agent_worker


class Empty(BaseModel):
    pass


@tool("odd.object")
async def odd_object(args: Empty, ctx: ToolContext) -> object:
    """Returns something that is not JSON."""
    return {"handle": object()}


@tool("huge.output")
async def huge_output(args: Empty, ctx: ToolContext) -> str:
    """Returns 3 MB: more than Temporal's payload limit."""
    return "x" * 3_000_000


plugin = Plugin("odd", tools=[odd_object, huge_output])


def one_round(*calls: tuple[str, object]) -> ScriptedModel:
    return ScriptedModel(lambda r: tool_calls(*calls) if r.round == 1 else text("handled"))  # type: ignore[arg-type]


async def test_malformed_tool_call_json_is_an_error_the_model_sees(dev_env: WorkflowEnvironment) -> None:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return ModelResponse(tool_calls=[ModelToolCall(id="c1", tool="odd.object",
                                                           arguments_error="not valid JSON: '{\"a\": '")])
        return text("sorry")
    async with agent_worker(dev_env, plugins=[plugin], model=ScriptedModel(script)) as client:
        prompt = await client.run("go")
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolError)
    assert entry.result.error.startswith("Invalid arguments for tool 'odd.object': not valid JSON")
    assert prompt.state == "completed"


async def test_model_with_neither_text_nor_calls_completes_empty(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=ScriptedModel([ModelResponse()])) as client:
        prompt = await client.run("say nothing")
    assert prompt.state == "completed" and prompt.output == []


async def test_empty_and_oversized_input_are_refused_before_start(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=ScriptedModel([text("x")])) as client:
        with pytest.raises(ValidationError, match="at least 1 character"):
            await client.start("")
        with pytest.raises(ValidationError, match="at most 100000 characters"):
            await client.start("x" * 100_001)


async def test_non_json_and_oversized_tool_outputs(dev_env: WorkflowEnvironment) -> None:
    model = one_round(("odd.object", {}), ("huge.output", {}))
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        prompt = await client.run("odd outputs")
    odd, huge = prompt.output[0], prompt.output[1]
    assert isinstance(odd.result, ToolError) and "not JSON-serialisable" in odd.result.error  # type: ignore[union-attr]
    assert isinstance(huge.result, ToolSuccess)  # type: ignore[union-attr]
    assert huge.result.output.endswith("[output truncated: 3000002 bytes, limit 256000]")  # type: ignore[union-attr]
    assert prompt.state == "completed"


class Exploding(Plugin):
    name = "exploding"

    async def prepare(self, ctx: PrepareContext) -> None:
        raise KeyError("settings")


async def test_plugin_prepare_raising_fails_prompt_with_reason(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin, Exploding()], model=ScriptedModel([text("x")])) as client:
        prompt = await (await client.start("hi")).result()
    assert prompt.state == "failed"
    assert prompt.error == "plugin 'exploding' failed in prepare: KeyError: 'settings'"


ATTEMPTS: Counter[str] = Counter()


def flaky(request: ModelRequest) -> ModelResponse:
    """429 with Retry-After, then 503 without, then success."""
    ATTEMPTS[request.prompt_id] += 1
    attempt = ATTEMPTS[request.prompt_id]
    if attempt == 1:
        raise RetryableModelError("openai gpt-x returned 429", status=429, retry_after=2.0)
    if attempt == 2:
        raise RetryableModelError("openai gpt-x returned 503", status=503)
    return text(f"ok after {attempt} attempts")


async def test_retryable_provider_errors_retry_with_backoff_and_retry_after(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=ScriptedModel(flaky)) as client:
        started = time.monotonic()
        prompt = await client.run("retry me")
        elapsed = time.monotonic() - started
    assert prompt.state == "completed" and prompt.output[-1].text == "ok after 3 attempts"  # type: ignore[union-attr]
    assert elapsed >= 2.0 + 2.0  # Retry-After 2 s, then the policy's backoff (1 s doubled)
    assert prompt.usage.model_calls == 1  # failed attempts are not counted


async def test_invalid_input_from_raw_temporal_cli_fails_the_workflow(dev_env: WorkflowEnvironment) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host}
    settings = Settings(task_queue="bad-input-q")
    started = subprocess.run([temporal_cli_path(), "workflow", "start", "--type", "PromptWorkflow",  # noqa: ASYNC221
                              "--task-queue", settings.task_queue, "-w", "bad-input-1",
                              "--input", '{"input": "hi", "max_rounds": "lots"}'],
                             env=env, capture_output=True, text=True, timeout=30)
    assert started.returncode == 0, started.stderr
    runtime = build_runtime(settings, plugins=[plugin], providers={"normal": ScriptedModel([text("x")])})
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
        handle = AgentClient(dev_env.client, settings).prompt("bad-input-1")
        prompt = await handle.result()  # a failed workflow, not a workflow task retrying forever
        status = (await handle.workflow.describe()).status
    assert status == WorkflowExecutionStatus.FAILED
    assert prompt.state == "failed" and "invalid PromptRequest input" in (prompt.error or "")
    assert "max_rounds" in (prompt.error or "")
