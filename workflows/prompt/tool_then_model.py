"""Which rounds run their tool call and the next model round in one activity (`dagent.tool_then_model`).

Run apart, a round with one regular tool call costs two activities and two workflow tasks: the tool's, then the
model's (a fast tool's call planned local costs a local activity and a second activation). Together they cost
one of each. They may go together only when the workflow decides nothing between them: the call runs now (no
approval, not a sub-agent, not a tool declared `local=True`), a next round follows (the round limit is not
reached, no budget stops it, no period budget must reserve it) and the model runs on the tools' queue. A user
message that arrives while the tool runs outdates the model's answer, as it does when it arrives during a model
call.
"""

from __future__ import annotations

from durable_agent.agent.models import Usage
from durable_agent.workflows.budget.limits import budget_reached
from durable_agent.workflows.protocol import PlannedCall, PromptRequest, ReadyCall


def fusable(calls: list[PlannedCall], round_number: int, request: PromptRequest, usage: Usage, *,
            period_budgets: bool) -> ReadyCall | None:
    """The round's only call, when it runs with the next model round in one activity; else None."""
    if (len(calls) != 1 or not isinstance(call := calls[0], ReadyCall) or (call.options.local and not call.fast)
            or call.agent is not None
            or round_number >= request.max_rounds or period_budgets or request.model_local
            or request.model_task_queue or request.model_routing is not None
            or budget_reached(usage, request.budget) is not None):
        return None
    return call
