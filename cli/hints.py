"""One-line explanations, with what to do next, for the mistakes people make most with `dagent`."""

from __future__ import annotations

import difflib

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.client import PromptNotFound
from durable_agent.config.connection import NOTHING_LISTENING, TemporalConnectError
from durable_agent.workers.settings import Settings
from durable_agent.workflows.names import PROMPT_WORKFLOW

RECENT_FOR_SUGGESTIONS = 500


def missing_prompt_id(exc: BaseException) -> str | None:
    """The prompt id an exception says does not exist, or None when it is about something else."""
    if isinstance(exc, PromptNotFound):
        return exc.prompt_id
    for error in (exc, exc.__cause__):
        if isinstance(error, RPCError) and error.status == RPCStatusCode.NOT_FOUND and "not found for ID" in str(error):
            return str(error).rsplit("ID:", 1)[-1].strip()
    return None


async def unknown_prompt(client: Client | None, prompt_id: str) -> str:
    """`no prompt 'x'`, suggesting recent prompt ids that look like it (a typo, a missing prefix, a truncated id)."""
    message = f"no prompt {prompt_id!r}"
    if client is not None:
        try:
            ids = [execution.id async for execution in client.list_workflows(
                f"WorkflowType = '{PROMPT_WORKFLOW}'", limit=RECENT_FOR_SUGGESTIONS)]
        except RPCError:
            ids = []
        containing = [i for i in ids if prompt_id and prompt_id in i]
        similar = (containing or difflib.get_close_matches(prompt_id, ids, n=3, cutoff=0.6))[:3]
        if similar:
            return f"{message} — did you mean {' or '.join(similar)}?"
    return f"{message} — `dagent ls` lists recent prompts"


def no_server(settings: Settings) -> str:
    return (f"no Temporal server at {settings.temporal_address} — start one with `dagent server` "
            "(or point TEMPORAL_ADDRESS or --address at yours)")


def is_connect_failure(exc: BaseException) -> bool:
    """No server at the address (a wrong certificate or key has its own message from config/connection.py)."""
    if isinstance(exc, TemporalConnectError):
        return NOTHING_LISTENING in str(exc)
    return isinstance(exc, RuntimeError) and str(exc).startswith("Failed client connect")


async def worker_polling(client: Client, settings: Settings) -> bool:
    """Whether any worker has polled the task queue recently (the server forgets pollers after minutes)."""
    response = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=settings.namespace, task_queue=TaskQueue(name=settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW), retry=True)
    return bool(response.pollers)


def no_worker(settings: Settings) -> str:
    default = Settings.model_fields["task_queue"].default
    start = "`dagent worker`" if settings.task_queue == default else \
        f"`DAGENT_TASK_QUEUE={settings.task_queue} dagent worker` (a worker on that queue)"
    return (f"no worker is polling task queue {settings.task_queue!r} — start one with {start} "
            "(the prompt waits and runs as soon as one starts)")


def refused_roles(refusal: str) -> list[str]:
    """The roles named by a refusal because the decider is not among the approvers (`approvers: role:finance`)."""
    import re

    if "may not decide this call" not in refusal:
        return []
    return list(dict.fromkeys(re.findall(r"\brole:([^\s,;]+)", refusal.split("approvers:", 1)[-1])))


def role_hint(refusal: str) -> str:
    """How to say the role a refusal names (` — if you hold that role, add --role finance`); '' if none."""
    roles = refused_roles(refusal)
    if not roles:
        return ""
    flags = " or ".join(f"--role {role}" for role in roles)
    return f" — if you hold {'that role' if len(roles) == 1 else 'one of those roles'}, add {flags}"

