"""A model's tool call planned against the tools its round offered: unknown, invalid, needing approval (the
tool's policy, run here because the workflow holds no tool code) or ready to run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_agent.agent.errors import ToolInputError
from durable_agent.agent.messages import ModelToolCall
from durable_agent.agent.models import ApprovalRequest
from durable_agent.agent.notify import Notify
from durable_agent.agent.subagents import sub_agent_of
from durable_agent.agent.tools import Tool
from durable_agent.workflows.protocol import (
    CallNeedingApproval,
    InvalidCall,
    PlannedCall,
    ReadyCall,
    SubAgentCall,
)


def sub_agent_call(tool: Tool[Any]) -> SubAgentCall | None:
    agent = sub_agent_of(tool)
    if agent is None:
        return None
    return SubAgentCall(instructions=agent.instructions, model=agent.model,
                        plugins=list(agent.plugins) if agent.plugins is not None else None,
                        max_rounds=agent.max_rounds, output_schema=agent.output_schema)


def approval_request(approval: ApprovalRequest, decision_key: str | None, four_eyes: bool,
                     notify: Notify | None = None) -> ApprovalRequest:
    """The policy's answer completed with what the worker decides (`four_eyes` and `notify`: the deployment's
    defaults, for a policy that declares none): the request the workflow asks with."""
    return approval.model_copy(update=dict(
        decision_key=decision_key, four_eyes=approval.four_eyes if approval.four_eyes is not None else four_eyes,
        notify=approval.notify or notify))


def plan_call(call: ModelToolCall, tools: dict[str, tuple[Tool[Any], str]], decision_key: str | None,
               runs_local: Callable[[Tool[Any]], bool], *, four_eyes: bool = False,
              notify: Notify | None = None) -> PlannedCall:
    found = tools.get(call.tool)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return InvalidCall(id=call.id, tool=call.tool, input=call.arguments,
                           error=f"Unknown tool '{call.tool}'. Available tools: {available}.")
    tool, plugin = found
    fields: dict[str, Any] = dict(
        id=call.id, tool=call.tool, input=call.arguments, plugin=plugin,
        options=tool.options.model_copy(update={"local": bool(tool.options.local)}), agent=sub_agent_call(tool))
    if call.arguments_error:
        return InvalidCall(**fields, error=f"Invalid arguments for tool '{call.tool}': {call.arguments_error}")
    try:
        args = tool.validate_input(call.arguments)
    except ToolInputError as exc:
        return InvalidCall(**fields, error=str(exc))
    try:
        approval = tool.approval_for(args)
    except Exception as exc:
        # Fail closed: a policy that cannot decide leaves the decision to a human.
        return CallNeedingApproval(**fields, input_schema=tool.parameters_schema(), approval=approval_request(
            ApprovalRequest(reason=f"The approval policy of '{tool.id}' raised {type(exc).__name__}: {exc}; "
                                   "a person must decide."), decision_key, four_eyes, notify))
    # A call that needs approval runs local too when its tool does: once approved it runs inside the workflow
    # task that takes the decision, and the next model round is scheduled in that same task.
    local = runs_local(tool) and fields["agent"] is None
    how = {"options": tool.options.model_copy(update={"local": local}), "fast": local and tool.options.local is None}
    if approval is None:
        return ReadyCall(**{**fields, **how})
    return CallNeedingApproval(**{**fields, **how}, input_schema=tool.parameters_schema(),
                               approval=approval_request(approval, decision_key, four_eyes, notify))
