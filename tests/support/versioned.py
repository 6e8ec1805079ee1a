"""A second build of the prompt workflow for the worker-versioning test (tests/temporal/test_versioning.py).

`PromptWorkflowV2` is the same (pinned) `PromptWorkflow` with an incompatible change: it starts with a 1 ms timer,
a command v1 histories do not have, so a v1 prompt replayed on it fails with a nondeterminism error. Only
worker versioning (PINNED prompts) keeps a waiting v1 prompt away from it. `V2Plugin` is the project's
plugin with this class in place of the prompt workflow on the (versioned) workers it configures.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.worker import WorkerConfig

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.models import Prompt
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workflows import PromptWorkflow, names
from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES
from durable_agent.workflows.inputs import raw_payloads
from durable_agent.workflows.versioning.deployment import PROMPT_VERSIONING

V2_TIMER = timedelta(milliseconds=1)


@workflow.defn(name=names.PROMPT_WORKFLOW, failure_exception_types=WORKFLOW_FAILURE_TYPES,
               versioning_behavior=PROMPT_VERSIONING)
class PromptWorkflowV2(PromptWorkflow):
    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Prompt:
        await workflow.sleep(V2_TIMER)  # the v2 code path: a command no v1 history has
        return await super().run(*payloads)


class V2Plugin(DurableAgentPlugin):
    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        config["workflows"] = [PromptWorkflowV2 if issubclass(w, PromptWorkflow) else w
                               for w in config.get("workflows") or []]
        return config


class Pay(BaseModel):
    amount: float


@tool("pay.send", approval=lambda args: Approval(reason="over 100") if args.amount > 100 else None)
async def pay(args: Pay, ctx: ToolContext) -> str:
    """Send money."""
    return f"sent {args.amount:g}"


plugin = Plugin("pay", tools=[pay])


def _script(request: ModelRequest) -> ModelResponse:
    if results := results_since_last_user(request):
        return text(f"done: {results[-1].content}")
    asked = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
    return tool_calls(("pay.send", {"amount": float(asked.split()[-1])}))


model = ScriptedModel(_script)
