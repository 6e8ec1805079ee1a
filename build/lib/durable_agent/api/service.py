"""What the routes do, over `AgentClient`: visibility, who may decide, error mapping, decision tokens."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import JsonValue
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.models import Conversation, Prompt, ToolOutput, ToolPending
from durable_agent.api.auth import Principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.problems import Problem
from durable_agent.client import AgentClient, DecisionRefused, PendingRow, PromptHandle
from durable_agent.workflows.corrections import merge_patch, schema_problem
from durable_agent.workflows.decision_tokens import (
    DecisionClaims,
    DecisionKind,
    input_digest,
    may_decide,
    sign_decision,
)

T = TypeVar("T")


async def temporal_call(call: Callable[[], Awaitable[T]], *, missing: str, detail: str) -> T:
    """Run a client call; a workflow that does not exist becomes the `missing` problem."""
    try:
        return await call()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise Problem(missing, detail) from exc
        if exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise Problem("temporal-unavailable", f"Temporal did not answer: {exc.message}") from exc
        raise


def _already_decided(entry: ToolOutput) -> Problem:
    assert entry.decision is not None
    return Problem("already-decided", f"tool call {entry.id!r} was already decided "
                                      f"({entry.decision.decision} by {entry.decision.by or 'nobody'})",
                   decision=entry.decision.model_dump(mode="json"))


class AgentService:
    def __init__(self, agent: AgentClient, config: ApiConfig) -> None:
        self.agent = agent
        self.config = config

    # --- reading ---------------------------------------------------------------------------------

    async def prompt(self, principal: Principal, prompt_id: str) -> tuple[PromptHandle, Prompt]:
        handle = self.agent.prompt(prompt_id)
        prompt = await temporal_call(handle.get, missing="unknown-prompt", detail=f"no prompt {prompt_id!r}")
        self.require_visible(principal, prompt.user_id, f"prompt {prompt_id!r}")
        return handle, prompt

    async def conversation(self, principal: Principal, conversation_id: str) -> Conversation:
        handle = self.agent.conversation(conversation_id)
        conversation = await temporal_call(handle.get, missing="unknown-conversation",
                                           detail=f"no conversation {conversation_id!r}")
        self.require_visible(principal, conversation.user_id, f"conversation {conversation_id!r}")
        return conversation

    @staticmethod
    def require_visible(principal: Principal, owner: str, what: str) -> None:
        if owner != principal.id and not principal.sees_everything:
            raise Problem("not-allowed", f"{what} belongs to another user")

    @staticmethod
    def require_owner_or_admin(principal: Principal, owner: str, what: str) -> None:
        if owner != principal.id and not principal.is_admin:
            raise Problem("not-allowed", f"only the owner or an admin may change {what}")

    def may_decide(self, principal: Principal, owner: str | None, approvers: list[str] | None) -> bool:
        """Who may decide a pending call: the tool's named approvers (users or roles) if it names any,
        else the prompt's owner, approvers and admins."""
        if approvers:
            return may_decide(approvers, principal.id, sorted(principal.roles))
        return principal.id == owner or principal.sees_everything

    async def pending(self, principal: Principal) -> list[PendingRow]:
        """Every waiting call the principal may see, addressed from its top prompt. Each prompt is asked for
        at most `pending_query_seconds`: one whose worker is down is left out rather than holding the list."""
        owner_filter = None if principal.sees_everything else principal.id
        return (await self.agent.pending(user_id=owner_filter, timeout=self.config.pending_query_seconds)).rows

    # --- deciding --------------------------------------------------------------------------------

    async def decide(self, principal: Principal, prompt_id: str, tool_call_id: str, kind: DecisionKind, *,
                     corrected: dict[str, JsonValue] | None = None, reason: str | None = None) -> ToolOutput:
        handle, prompt = await self.prompt(principal, prompt_id)
        entry = prompt.tool_call(tool_call_id)
        sub_agent_call = "/" in tool_call_id  # a sub-agent's call, listed and decided through this prompt
        if entry is None and not sub_agent_call:
            raise Problem("unknown-tool-call", f"prompt {prompt_id!r} has no tool call {tool_call_id!r}")
        if entry is not None and entry.decision is not None:
            raise _already_decided(entry)
        pending = next((p for p in await handle.pending_approvals() if p.tool_call_id == tool_call_id), None)
        if pending is None or (entry is not None and not isinstance(entry.result, ToolPending)):
            # Someone may have decided it since the record was read: say so rather than "not pending".
            latest = (await handle.get()).tool_call(tool_call_id)
            if latest is not None and latest.decision is not None:
                raise _already_decided(latest)
            raise Problem("not-pending", f"tool call {tool_call_id!r} is not waiting for a decision "
                                         f"(prompt {prompt.state})")
        if not self.may_decide(principal, prompt.user_id, pending.approvers):
            named = f"; approvers: {', '.join(pending.approvers)}" if pending.approvers else ""
            raise Problem("not-allowed", f"{principal.id} may not decide {tool_call_id!r}{named}")
        if corrected is not None:  # a JSON merge patch: only the fields given change
            problem = schema_problem(merge_patch(pending.input, corrected), pending.input_schema)
            if problem:
                raise Problem("invalid-arguments", problem, schema=pending.input_schema)
        # The token names the prompt that waits and its own call id (a sub-agent's prompt checks it itself).
        waiting_prompt = pending.path[-1] if pending.path else prompt_id
        token = self._token(principal, waiting_prompt, tool_call_id.rsplit("/", 1)[-1], kind, corrected)
        try:
            if kind == "approve":
                resolved = await handle.approve(tool_call_id, by=principal.id, input=corrected, wait=True, token=token)
            else:
                resolved = await handle.reject(tool_call_id, by=principal.id, reason=reason, wait=True, token=token)
        except DecisionRefused as exc:
            raise Problem(exc.kind, str(exc)) from exc
        assert resolved is not None
        return resolved

    def _token(self, principal: Principal, prompt_id: str, tool_call_id: str, kind: DecisionKind,
               corrected: dict[str, JsonValue] | None) -> str | None:
        if not self.config.decision_private_key:
            return None
        claims = DecisionClaims(sub=principal.id, roles=sorted(principal.roles), prompt=prompt_id, call=tool_call_id,
                                decision=kind, input_sha256=input_digest(corrected),
                                exp=int(time.time()) + self.config.decision_token_seconds)
        return sign_decision(claims, self.config.decision_private_key)
