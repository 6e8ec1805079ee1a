"""A PromptWorkflow with a bug in its loop: a test double, since the real one has no known bug to trigger."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import Prompt
    from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES
    from durable_agent.workflows.inputs import raw_payloads
    from durable_agent.workflows.prompt.workflow import PromptWorkflow


@workflow.defn(name="BuggyPromptWorkflow", failure_exception_types=WORKFLOW_FAILURE_TYPES)
class BuggyPromptWorkflow(PromptWorkflow):
    @workflow.init
    @raw_payloads
    def __init__(self, *payloads: object) -> None:
        super().__init__(*payloads)

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Prompt:
        return await super().run(*payloads)

    async def _run_rounds(self) -> None:
        raise KeyError("a bug in the workflow loop")
