"""The sandboxed runner's instances answer the payload visitor's context questions by a plain call into the
sandbox (workers.plugin._ContextsByCall): every answer equals the one Temporal's own sandboxed instance gives by
exec under its import hook. Real dev server; a prompt with a regular tool activity and a sub-agent (child
workflow), under DAGENT_WORKFLOW_SANDBOX=on and strict."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent import workers
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import (
    AgentSandboxedRunner,
    DurableAgentPlugin,
    SandboxedInstance,
    _ContextsByCall,
    workflow_runner,
)
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.workers import TEST_SETTINGS


class Topic(BaseModel):
    topic: str


@tool("facts.find")
async def find(args: Topic, ctx: ToolContext) -> str:
    """Look a topic up."""
    return f"facts about {args.topic}"


helper = SubAgent("helpers.ask", description="Ask the helper.", instructions="You help.", plugins=("facts",),
                  max_rounds=3)


def _script(request: ModelRequest) -> ModelResponse:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    if "You help." in (request.instructions or ""):
        return tool_calls(("facts.find", {"topic": "tides"})) if not results else text("helper: " + results[0].content)
    if request.round == 1:
        return tool_calls(("facts.find", {"topic": "winds"}), ("helpers.ask", {"task": "tides"}))
    return text(" | ".join(r.content for r in results))


@pytest.mark.parametrize("mode", ["on", "strict"])
async def test_contexts_answered_by_call_equal_the_sandboxes_own(
        dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    answers: list[tuple[str, Any, Any]] = []

    class Checked(_ContextsByCall):
        def get_serialization_context(self, command_info: Any) -> Any:
            fast = super().get_serialization_context(command_info)
            answers.append(("serialization", fast, SandboxedInstance.get_serialization_context(self, command_info)))
            return fast

        def get_external_store_context(self, command_info: Any) -> Any:
            fast = super().get_external_store_context(command_info)
            answers.append(("store", fast, SandboxedInstance.get_external_store_context(self, command_info)))
            return fast

    monkeypatch.setattr(workers.plugin, "_ContextsByCall", Checked)
    assert isinstance(workflow_runner(mode), AgentSandboxedRunner)
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "workflow_sandbox": mode})
    model = ScriptedModel(_script)
    plugins = [Plugin("facts", tools=[find]), Plugin("helpers", tools=[helper.tool()])]
    runtime = build_runtime(settings, plugins=plugins, providers={"normal": model, "high": model})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])
    async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings):
        prompt = await AgentClient(client, settings).run("winds and tides?", user_id="u1")
    assert prompt.state == "completed"
    assert [o.result for o in prompt.output if isinstance(o, ToolOutput)] == [
        ToolSuccess(output="facts about winds"), ToolSuccess(output="helper: facts about tides")]
    kinds = {(kind, type(fast).__name__) for kind, fast, _ in answers}
    # activities' and the child workflow's own contexts, and the workflow's: all asked, all answered alike
    assert {("serialization", "ActivitySerializationContext"), ("serialization", "WorkflowSerializationContext"),
            ("store", "StorageDriverStoreContext")} <= kinds
    [sub_agent] = [o for o in prompt.output if isinstance(o, ToolOutput) and o.child_prompt_id]
    assert any(getattr(fast, "workflow_id", None) == sub_agent.child_prompt_id
               for kind, fast, _ in answers if kind == "serialization")  # the child workflow's own context
    assert [(kind, fast) for kind, fast, slow in answers if fast != slow] == []
