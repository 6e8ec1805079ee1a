"""Where a prompt's model calls run is the worker's to say: its model queues, provider routing and local model
calls (`WorkerSettings`), given to each prompt it runs by a workflow interceptor, never by the client that
started it.

`RoutingInterceptor` (the plugin adds it to every worker and replayer) fills the worker's routing into the
`PromptRequest` of a `PromptWorkflow` before its `run` starts, when the request carries none of `model_task_queue`,
`model_routing` and `model_local` (a caller that sets one of them, e.g. a raw SDK start, keeps its own). It costs
no billable action: no marker, no activity. The value a prompt used is in its history already: each model call's
`ActivityTaskScheduled` event names its task queue (a local call is a marker), and the input of a sub-agent of
the same tier carries what its parent used (a conversation's prompts and other tiers' sub-agents are routed by the
worker that runs them). On replay the interceptor gives the same value again from
the same configuration; Temporal's replay check compares an activity's type and id, not its task queue, so a
worker whose queues were renamed replays its prompts and sends their next calls to the new queues. A change that
turns model queues on or off, or local model calls on or off, changes the commands a prompt gives (a tool and
its next model round run together only without a model queue): deploy it as a new build (worker versioning,
docs/operations.md) or with the fleet drained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from durable_agent.workflows.protocol import ModelRouting

ROUTING_FIELDS = frozenset({"model_task_queue", "model_routing", "model_local"})


class TierRouting(BaseModel):
    """Where one tier's model calls start, and the queue of each provider a fallback round may move to."""

    model_config = ConfigDict(frozen=True)

    model_task_queue: str | None = None
    model_routing: ModelRouting | None = None


class WorkerRouting(BaseModel):
    """A worker's routing of model calls, by tier (built by `WorkerSettings.routing()`)."""

    model_config = ConfigDict(frozen=True)

    tiers: dict[str, TierRouting]
    model_local: bool = False

    def fill(self, request: Any) -> None:
        """Give `request` (a `PromptRequest`, in place) this worker's routing, unless its caller chose its own."""
        if request.model_fields_set & ROUTING_FIELDS:
            return
        routing = self.tiers.get(request.model, TierRouting())  # its fields as plain data: the request validates them
        fields = {"model_task_queue": routing.model_task_queue, "model_local": self.model_local,
                  "model_routing": routing.model_routing.model_dump() if routing.model_routing else None}
        if not any(fields.values()):  # model calls on the workflow's queue, as activities: what the request says
            return
        routed = type(request).model_validate(fields)  # by the request's own class (the sandbox's re-import)
        for name in fields:
            setattr(request, name, getattr(routed, name))


class RoutingInterceptor(Interceptor):
    """Gives every `PromptWorkflow` this worker runs the worker's routing (see the module's docstring)."""

    def __init__(self, routing: WorkerRouting) -> None:
        self.routing = routing

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        routing = self.routing

        class _Routed(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                # The workflow decoded its input when it was built; `run` has not started, so no command yet.
                request = getattr(workflow.instance(), "routable_request", None)
                if request is not None:
                    routing.fill(request)
                return await self.next.execute_workflow(input)

        return _Routed


def has_routing(interceptors: Sequence[object] | None) -> bool:
    """Whether a worker's interceptors already route its prompts (one given by `create_worker`'s settings wins
    over the plugin's)."""
    return any(isinstance(i, RoutingInterceptor) for i in interceptors or ())


__all__ = ["ROUTING_FIELDS", "RoutingInterceptor", "TierRouting", "WorkerRouting", "has_routing"]
