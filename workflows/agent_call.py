"""Run a prompt from your own workflow: a child `PromptWorkflow` with a typed request and a `Prompt` result.

    from temporalio import workflow
    with workflow.unsafe.imports_passed_through():
        from durable_agent import PromptRequest, run_prompt

    @workflow.defn
    class Onboarding:
        @workflow.run
        async def run(self, user: str) -> str:
            prompt = await run_prompt(PromptRequest(input=f"Open {user}'s accounts", user_id=user))
            return prompt.output[-1].text

The prompt is an ordinary prompt: its tools, approvals (decided by people through the API, the CLI, the inbox or
a raw signal, for days if need be), budgets and record are the same as for one an `AgentClient` starts; the
calling workflow simply waits on the child. It runs on the worker that serves `task_queue` (the calling
workflow's own queue by default), which must have the Durable Agent plugin. A prompt that fails raises
`ChildWorkflowError` (its record is the failure's first detail) unless `fail_workflow_on_error=False`, which
returns the failed record instead. Period budgets apply to the principals the request names in `budgets`
(`user:<id>`, `conversation:<id>`): a workflow cannot look the ledgers up first as a client does.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from durable_agent.agent.models import Prompt
from durable_agent.workflows.details import prompt_static_details, prompt_summary
from durable_agent.workflows.names import CONVERSATION_ID, PROMPT_STATE, PROMPT_WORKFLOW, USER_ID
from durable_agent.workflows.protocol import PromptRequest
from durable_agent.workflows.versioning.versions import CURRENT_VERSION


async def start_prompt(request: PromptRequest, *, id: str | None = None, task_queue: str | None = None,
                       parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
                       execution_timeout: timedelta | None = None) -> ChildWorkflowHandle[Any, Prompt]:
    """Start the prompt as a child of the calling workflow; await the handle for its record. `id`: the prompt's
    workflow id (default `<this workflow's id>.prompt-<random>`, which nobody can start first). When the calling
    workflow closes, the prompt is asked to cancel (`parent_close_policy`)."""
    prompt_id = id or request.prompt_id or f"{workflow.info().workflow_id}.prompt-{workflow.uuid4().hex[:12]}"
    request = request.model_copy(update={
        "prompt_id": prompt_id,
        "workflow_version": request.workflow_version if request.workflow_version is not None else CURRENT_VERSION})
    summary = prompt_summary(request.user_id, request.input)
    return await workflow.start_child_workflow(
        PROMPT_WORKFLOW, request, id=prompt_id, task_queue=task_queue, result_type=Prompt,
        parent_close_policy=parent_close_policy, execution_timeout=execution_timeout,
        static_summary=summary, static_details=prompt_static_details(request.user_id, request.input),
        memo={"summary": summary},
        search_attributes=TypedSearchAttributes([
            SearchAttributePair(PROMPT_STATE, "running"), SearchAttributePair(USER_ID, request.user_id),
            *([SearchAttributePair(CONVERSATION_ID, request.conversation_id)] if request.conversation_id else [])]))


async def run_prompt(request: PromptRequest, *, id: str | None = None, task_queue: str | None = None,
                     parent_close_policy: ParentClosePolicy = ParentClosePolicy.REQUEST_CANCEL,
                     execution_timeout: timedelta | None = None) -> Prompt:
    """Run the prompt as a child of the calling workflow and return its record once it finished (waiting
    durably for its approvals meanwhile)."""
    handle = await start_prompt(request, id=id, task_queue=task_queue, parent_close_policy=parent_close_policy,
                                execution_timeout=execution_timeout)
    return await handle
