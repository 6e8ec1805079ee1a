"""The Python client: start prompts, read them, wait for them, decide approvals, cancel.

A thin layer over the Temporal client: everything here can also be done with any Temporal SDK or the
`temporal` CLI by workflow type `PromptWorkflow` and the signal/query/update names it uses.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from temporalio.client import (
    Client,
    ScheduleHandle,
    WorkflowExecution,
)
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from durable_agent.agent.ids import reserved_problem
from durable_agent.agent.models import Conversation, ModelTier, Prompt, PromptRef
from durable_agent.agent.period_budgets import BudgetLimit, LedgerView
from durable_agent.client.budgets import BudgetRow, applying_budgets, list_budgets, set_budget, show_budget
from durable_agent.client.handles import ConversationHandle, PromptHandle
from durable_agent.client.pending import QUERY_SECONDS, PendingList, pending_list
from durable_agent.client.priority import prompt_priority
from durable_agent.client.stuck import TaskProblem, workflows_with_task_problems
from durable_agent.config.connection import connect_client
from durable_agent.config.observability import temporal_plugins
from durable_agent.config.settings import ClientPlugin, ClientSettings
from durable_agent.workflows.details import prompt_static_details, prompt_summary
from durable_agent.workflows.names import (
    CONVERSATION_ID,
    CONVERSATION_WORKFLOW,
    PROMPT_STATE,
    PROMPT_WORKFLOW,
    USER_ID,
)
from durable_agent.workflows.protocol import (
    ConversationRequest,
    PromptRequest,
)
from durable_agent.workflows.telemetry import span_kind, tracer
from durable_agent.workflows.versioning.versions import CURRENT_VERSION


def new_prompt_id() -> str:
    return f"prompt-{uuid.uuid4().hex[:16]}"


class PromptSummary(PromptRef):
    """A prompt as the visibility store lists it (search attributes), without querying the workflow; its owner
    is "" when its search attributes lack one."""

    state: str | None
    status: str
    started_at: datetime | None


class AgentClient:
    """Starts, reads and decides prompts. Its settings are a client's (`ClientSettings`; a worker's `Settings`
    will do, their worker part unused): where a prompt's model calls run is the worker's to say."""

    def __init__(self, client: Client, settings: ClientSettings | None = None) -> None:
        self.client = client
        self.settings = settings or ClientSettings.from_env()

    @classmethod
    async def connect(cls, settings: ClientSettings | None = None) -> AgentClient:
        """A client of its own: our data converter (payload store, codec) and, with tracing configured,
        OpenTelemetry's plugin, connected through the settings' envconfig profile (TLS, API key). A worker needs
        a client connected with `DurableAgentPlugin` (`durable_agent.workers.worker.connect`); `create_worker` on
        this one takes its settings."""
        settings = settings or ClientSettings.from_env()
        plugins = [ClientPlugin(settings), *temporal_plugins(settings.observability())]
        return cls(await connect_client(settings.temporal_address, settings.namespace, settings.temporal_profile,
                                        settings.grpc_compression, plugins=plugins), settings)

    async def read_file(self, content_ref: str) -> bytes:
        """The content of a file a tool attached (`FileOutput.content_ref`), from the shared store."""
        return await self.settings.file_store().aget(content_ref)

    async def start(self, input: str | None, *, user_id: str = "anonymous", model: ModelTier = "normal",
                    prompt_id: str | None = None, conversation_id: str | None = None,
                    instructions: str | None = None, max_rounds: int | None = None,
                    history: list[Prompt] | None = None, priority: Priority | None = None,
                    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    **options: Any) -> PromptHandle:
        """Start a prompt. `options` are further `PromptRequest` fields (output_schema, output_retries,
        context_max_messages, context_max_tokens, plugin_state, visible; `model_task_queue`, `model_routing` or
        `model_local` override, for this prompt, the routing its worker gives it). `priority`: Temporal task priority
        (client/priority.py); default: fairness by `user_id`, the server's default priority. A `prompt_id` given
        must be a caller's id (agent/ids.py: no reserved prefix) that no prompt ever had: a closed prompt's id is
        refused (`WorkflowAlreadyStartedError`) unless `id_reuse_policy` says otherwise."""
        if prompt_id is not None and (problem := reserved_problem("prompt_id", prompt_id)):
            raise ValueError(problem)
        prompt_id = prompt_id or new_prompt_id()
        priority = priority or prompt_priority(user_id)
        if max_rounds is not None:
            options["max_rounds"] = max_rounds
        options = {"workflow_version": CURRENT_VERSION} | options
        if "budgets" not in options:  # the period budgets the prompt is under (client/budgets.py)
            options["budgets"] = await applying_budgets(self.client, user_id, conversation_id)
        request = PromptRequest(prompt_id=prompt_id, user_id=user_id, model=model, input=input,
                                conversation_id=conversation_id, instructions=instructions,
                                history=history or [], **options)
        # The root of the prompt's trace (with tracing on): the workflow's spans are its children.
        with tracer().start_as_current_span(
                "dagent.prompt.start", kind=span_kind("CLIENT"), attributes={"dagent.prompt.id": prompt_id}):
            summary = prompt_summary(user_id, input)
            handle = await self.client.start_workflow(
                PROMPT_WORKFLOW, request, id=prompt_id, task_queue=self.settings.task_queue,
                static_summary=summary, static_details=prompt_static_details(user_id, input),
                memo={"summary": summary},  # listings (dagent ls) show it; summaries are not listed
                # listed as running before the workflow's first task
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(PROMPT_STATE, "running"), SearchAttributePair(USER_ID, user_id),
                    *([SearchAttributePair(CONVERSATION_ID, conversation_id)] if conversation_id else [])]),
                result_type=Prompt,
                # With a worker for the queue in this process (on this client), its first workflow task comes
                # back in the start reply; otherwise the SDK leaves the request out. Not with worker versioning:
                # an eager start skips the deployment's routing and pins the prompt to this process's build.
                request_eager_start=not self.settings.deployment_name, id_reuse_policy=id_reuse_policy,
                priority=priority,  # its model calls, tools and sub-agents inherit it
            )
        return PromptHandle(handle, self.client)

    async def run(self, input: str | None, **options: object) -> Prompt:
        handle = await self.start(input, **options)  # type: ignore[arg-type]
        return await handle.result()

    async def start_conversation(self, *, user_id: str = "anonymous", conversation_id: str | None = None,
                                 model: ModelTier = "normal", priority: Priority | None = None,
                                 **options: Any) -> ConversationHandle:
        """Start (or attach to, if it runs already) a conversation. `options`: further
        `ConversationRequest` fields (instructions, max_rounds, prompts_per_run, plugin_state). `priority`:
        as for `start`; the conversation's prompts inherit it. A `conversation_id` given must be a caller's id
        (agent/ids.py: no reserved prefix)."""
        if conversation_id is not None and (problem := reserved_problem("conversation_id", conversation_id)):
            raise ValueError(problem)
        conversation_id = conversation_id or f"conv-{uuid.uuid4().hex[:12]}"
        options = {"workflow_version": CURRENT_VERSION} | options
        if "budgets" not in options:
            options["budgets"] = await applying_budgets(self.client, user_id, conversation_id)
        request = ConversationRequest(conversation_id=conversation_id, user_id=user_id, model=model, **options)
        handle = await self.client.start_workflow(
            CONVERSATION_WORKFLOW, request, id=conversation_id, task_queue=self.settings.task_queue,
            result_type=Conversation, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"conversation of {user_id}",
            priority=priority or prompt_priority(user_id),
        )
        return ConversationHandle(handle, self.client)

    async def schedule(self, schedule_id: str, input: str | None, **options: Any) -> ScheduleHandle:
        """A recurring prompt on a Temporal Schedule: `cron=` or `every=`, `jitter=`, `time_zone=`, `overlap=`,
        `user_id=`... (client/schedules.py `create_schedule`). Each run is an ordinary prompt."""
        from durable_agent.client.schedules import create_schedule

        return await create_schedule(self, schedule_id, input, **options)

    def conversation(self, conversation_id: str) -> ConversationHandle:
        return ConversationHandle(self.client.get_workflow_handle(conversation_id, result_type=Conversation),
                                  self.client)

    def prompt(self, prompt_id: str) -> PromptHandle:
        return PromptHandle(self.client.get_workflow_handle(prompt_id, result_type=Prompt), self.client)

    async def set_budget(self, principal: str, limit: BudgetLimit | None, *, by: str | None = None) -> LedgerView:
        """Set (None: remove) the period budget of `user:<id>` or `conversation:<id>` (client/budgets.py)."""
        return await set_budget(self, principal, limit, by=by)

    async def budget(self, principal: str) -> LedgerView:
        """A principal's budget and this period's spend."""
        return await show_budget(self, principal)

    async def budgets(self) -> list[BudgetRow]:
        """Every principal with a budget."""
        return await list_budgets(self)

    async def stuck(self) -> list[TaskProblem]:
        """Running prompts and conversations whose workflow task keeps failing, with the reason."""
        return await workflows_with_task_problems(self.client, (PROMPT_WORKFLOW, CONVERSATION_WORKFLOW))

    async def list_prompts(self, *, user_id: str | None = None, conversation_id: str | None = None,
                           state: str | None = None, limit: int = 100) -> list[PromptSummary]:
        """Prompts by user, conversation and state (the search attributes), newest first."""
        query = prompt_query(user_id=user_id, conversation_id=conversation_id, state=state)
        return [PromptSummary(**_ref(e), state=e.typed_search_attributes.get(PROMPT_STATE),
                              status=e.status.name.lower() if e.status else "unknown", started_at=e.start_time)
                async for e in self.client.list_workflows(query, limit=limit)]

    async def pending(self, *, user_id: str | None = None, timeout: float = QUERY_SECONDS, limit: int | None = None,
                      cursor: str | None = None) -> PendingList:
        """Every call waiting for a decision (of `user_id`'s prompts), addressed from its top prompt, or with
        `limit` one page from `cursor` on (client/pending.py `pending_list`)."""
        return await pending_list(self, user_id, timeout=timeout, limit=limit, cursor=cursor)

    async def waiting_prompts(self, *, user_id: str | None = None) -> list[PromptRef]:
        """Prompts waiting for approval, found through the `PromptState` search attribute."""
        query = prompt_query(user_id=user_id or None, state="waiting_for_approval", running=True)
        return [PromptRef(**_ref(e)) async for e in self.client.list_workflows(query)]


def _ref(execution: WorkflowExecution) -> dict[str, Any]:
    """A listed prompt's reference fields, from its search attributes (owner "" when they lack one)."""
    attrs = execution.typed_search_attributes
    return {"prompt_id": execution.id, "user_id": attrs.get(USER_ID) or "",
            "conversation_id": attrs.get(CONVERSATION_ID)}


def prompt_query(*, user_id: str | None = None, conversation_id: str | None = None, state: str | None = None,
                 running: bool = False, task_queue: str | None = None) -> str:
    """The visibility query for prompts by user, conversation, state and task queue (values quoted),
    optionally only those whose workflow still runs."""
    query = f"WorkflowType = '{PROMPT_WORKFLOW}'"
    for key, value in ((USER_ID.name, user_id), (CONVERSATION_ID.name, conversation_id),
                       (PROMPT_STATE.name, state), ("TaskQueue", task_queue)):
        if value is not None:
            query += f" AND {key} = '{_quote(value)}'"
    return query + (" AND ExecutionStatus = 'Running'" if running else "")


def _quote(value: str) -> str:
    """A value inside a single-quoted visibility query literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")
