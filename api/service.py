"""What the routes do, over `AgentClient`: visibility, who may decide, error mapping, decision tokens."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import JsonValue
from temporalio.client import WorkflowExecutionDescription, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent import identity
from durable_agent.agent.logging import get_logger
from durable_agent.agent.models import (
    ApprovalRequest,
    Conversation,
    FileOutput,
    Prompt,
    TextOutput,
    ToolOutput,
    WidgetOutput,
)
from durable_agent.api.auth import Principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.problems import Problem
from durable_agent.api.schemas import ApprovalContext
from durable_agent.client import AgentClient, DecisionRefused, PromptHandle
from durable_agent.client.pending import PendingList, may_see
from durable_agent.config.connection import described
from durable_agent.workflows.corrections import merge_patch, schema_problem
from durable_agent.workflows.decision_tokens import (
    DecisionClaims,
    DecisionKind,
    input_digest,
    sign_decision,
)
from durable_agent.workflows.names import CONVERSATION_WORKFLOW, PROMPT_WORKFLOW
from durable_agent.workflows.protocol import PendingApproval
from durable_agent.workflows.transcript import json_digest

T = TypeVar("T")
CONTEXT_CACHE_SIZE = 2000  # approval contexts kept (they never change once a call waits)
log = get_logger("durable_agent.api.service")


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


def approval_context(top: Prompt | None, waiting: Prompt, call_id: str, prefix: str) -> ApprovalContext | None:
    """The context of the call `call_id` of `waiting` (a sub-agent's prompt, or `top` itself): the calls of
    one model response were recorded together, so they share `started_at`, right after the response's text."""
    index = next((i for i, e in enumerate(waiting.output) if isinstance(e, ToolOutput) and e.id == call_id), None)
    if index is None:
        return None
    entry = waiting.output[index]
    assert isinstance(entry, ToolOutput)
    same_response = [e for e in waiting.output if isinstance(e, ToolOutput) and e.started_at == entry.started_at]
    message = None
    for earlier in reversed(waiting.output[:index]):
        if isinstance(earlier, TextOutput):
            message = earlier.text
            break
        if isinstance(earlier, FileOutput | WidgetOutput):
            continue
        if not (isinstance(earlier, ToolOutput) and earlier.started_at == entry.started_at):
            break
    batch = [prefix + e.id for e in same_response if isinstance(e.result, ApprovalRequest) or e.decision is not None]
    return ApprovalContext(prompt_input=(top or waiting).input, model_message=message, batch=batch, position=index)


class AgentService:
    def __init__(self, agent: AgentClient, config: ApiConfig) -> None:
        self.agent = agent
        self.config = config
        self._contexts: OrderedDict[tuple[str, str], ApprovalContext] = OrderedDict()

    # --- reading ---------------------------------------------------------------------------------

    async def prompt(self, principal: Principal, prompt_id: str) -> tuple[PromptHandle, Prompt]:
        handle = self.agent.prompt(prompt_id)
        prompt = await self._query(handle.get, prompt_id, PROMPT_WORKFLOW, "unknown-prompt", "prompt")
        self.require_visible(principal, prompt.user_id, f"prompt {prompt_id!r}")
        return handle, prompt

    async def conversation(self, principal: Principal, conversation_id: str) -> Conversation:
        handle = self.agent.conversation(conversation_id)
        conversation = await self._query(handle.get, conversation_id, CONVERSATION_WORKFLOW, "unknown-conversation",
                                         "conversation")
        self.require_visible(principal, conversation.user_id, f"conversation {conversation_id!r}")
        return conversation

    async def _query(self, call: Callable[[], Awaitable[T]], workflow_id: str, kind: str, missing: str,
                     noun: str) -> T:
        """A record query; a workflow of another type under that id (its query handler is missing) is `missing`."""
        try:
            return await temporal_call(call, missing=missing, detail=f"no {noun} {workflow_id!r}")
        except WorkflowQueryFailedError:
            await self.require_kind(workflow_id, kind, noun, slug=missing)
            raise

    async def describe(self, workflow_id: str) -> WorkflowExecutionDescription | None:
        """The workflow with this id (its latest run, running or closed), or None if there is none."""
        return await described(self.agent.client.get_workflow_handle(workflow_id))

    async def require_kind(self, workflow_id: str, kind: str, noun: str, *, slug: str = "id-taken") -> None:
        """A problem (`slug`) when `workflow_id` is taken by a workflow that is not a `kind`."""
        description = await self.describe(workflow_id)
        if description is not None and (found := description.workflow_type) != kind:
            other = {PROMPT_WORKFLOW: "prompt", CONVERSATION_WORKFLOW: "conversation"}.get(found, found)
            raise Problem(slug, f"{workflow_id!r} is a {other}, not a {noun}")

    @staticmethod
    def require_visible(principal: Principal, owner: str, what: str) -> None:
        if owner != principal.id and not principal.sees_everything:
            raise Problem("not-allowed", f"{what} belongs to another user")

    @staticmethod
    def require_owner_or_admin(principal: Principal, owner: str, what: str) -> None:
        if owner != principal.id and not principal.is_admin:
            raise Problem("not-allowed", f"only the owner or an admin may change {what}")

    def refusal(self, principal: Principal, owner: str | None, call: PendingApproval,
                kind: DecisionKind = "approve") -> str | None:
        """Why the principal may not decide a pending call, or None: the tool's named approvers (`user:`/`role:`,
        agent/identity.py) if it names any, else the prompt's owner, approvers and admins; with four-eyes, the
        owner may reject but not approve."""
        who = identity.Identity.of(principal.id, principal.roles)
        approving = kind == "approve"
        if call.approvers:
            return identity.may_decide(who, call.approvers, owner=owner, four_eyes=bool(call.four_eyes),
                                       approving=approving)
        if principal.id != owner and not principal.sees_everything:
            return f"{principal.id} may not decide this call"
        if call.four_eyes and approving and owner is not None and principal.id == identity.person_id(owner):
            return identity.FOUR_EYES_REFUSAL  # the owner by the decider's rule (`user:fin3` is fin3)
        return None

    def may_decide(self, principal: Principal, owner: str | None, call: PendingApproval) -> bool:
        return self.refusal(principal, owner, call) is None

    async def pending(self, principal: Principal, *, limit: int | None = None,
                      cursor: str | None = None) -> PendingList:
        """The waiting calls the principal may see (client/pending.py `may_see`: their own prompts', those
        whose approvers name them or one of their roles, or all with a global role), addressed from its top
        prompt; with `limit`, of one page of waiting prompts (`total` and `next_cursor` say what is left). Each
        prompt is asked for at most `pending_query_seconds`: one whose worker is down is left out rather than
        holding the list."""
        found = await self.agent.pending(user_id=None, timeout=self.config.pending_query_seconds, limit=limit,
                                         cursor=cursor)
        found.rows = await self._own_rows(found.rows)
        who = identity.Identity.of(principal.id, principal.roles)
        found.rows = [row for row in found.rows if may_see(row, who, sees_everything=principal.sees_everything)]
        return found

    async def _own_rows(self, rows: list[PendingApproval]) -> list[PendingApproval]:
        """Rows of sub-agents' calls as the sub-agents' own prompts list them (`own_call`, all at once, each
        bounded by `pending_query_seconds`); a row no sub-agent of its prompt waits for (an invented one), or
        whose prompts did not answer in time, is left out."""
        async def own(row: PendingApproval) -> PendingApproval | None:
            if not row.path:
                return row
            try:
                async with asyncio.timeout(self.config.pending_query_seconds):
                    call = await self.own_call(await self.agent.prompt(row.prompt_id).get(), row.tool_call_id)
            except Exception:  # slow or gone: listed again on the next call
                return None
            return None if call is None else call.model_copy(update={
                "prompt_id": row.prompt_id, "user_id": row.user_id, "conversation_id": row.conversation_id})

        return [row for row in await asyncio.gather(*(own(r) for r in rows)) if row is not None]

    async def approval_contexts(self, rows: list[PendingApproval]) -> dict[tuple[str, str], ApprovalContext]:
        """(prompt id, call id) -> the call's context, for the rows whose prompts answered in time. A context
        never changes once the call waits, so each is read once (one query per prompt) and kept."""
        new = [row for row in rows if (row.prompt_id, row.tool_call_id) not in self._contexts]
        sub_agents = [row.path[-1] for row in new if row.path]
        wanted = list(dict.fromkeys([row.prompt_id for row in new] + sub_agents))

        async def read(prompt_id: str) -> Prompt | None:
            try:
                return await asyncio.wait_for(self.agent.prompt(prompt_id).get(), self.config.pending_query_seconds)
            except Exception:  # slow or gone: no context this time, asked again on the next list
                return None

        records = dict(zip(wanted, await asyncio.gather(*(read(p) for p in wanted)), strict=True))
        for row in new:
            waiting = records.get(row.path[-1] if row.path else row.prompt_id)
            if waiting is None:
                continue
            prefix, _, own_id = row.tool_call_id.rpartition("/")
            context = approval_context(records.get(row.prompt_id), waiting, own_id, prefix + "/" if prefix else "")
            if context is not None:
                self._contexts[(row.prompt_id, row.tool_call_id)] = context
        while len(self._contexts) > CONTEXT_CACHE_SIZE:
            self._contexts.popitem(last=False)
        return {key: self._contexts[key] for row in rows if (key := (row.prompt_id, row.tool_call_id))
                in self._contexts}

    # --- sub-agents' calls, from their own prompts ---------------------------------------------------

    async def _chain(self, top: Prompt, tool_call_id: str) -> list[str] | None:
        """The sub-agent prompts from `top` down to the one that waits for `tool_call_id` (`<call>/<its call>`,
        nested), each found in its parent's own record (the child id the parent started), never in a report a
        child sends up (which anyone who can read the child's input could forge); None when one is not running."""
        chain, record = [], top
        for segment in tool_call_id.split("/")[:-1]:
            entry = record.tool_call(segment)
            if entry is None or entry.child_prompt_id is None or entry.finished_at is not None:
                return None
            chain.append(entry.child_prompt_id)
            record = await self.agent.prompt(entry.child_prompt_id).get()
        return chain

    async def own_call(self, top: Prompt, tool_call_id: str) -> PendingApproval | None:
        """A sub-agent's pending call as the sub-agent's own prompt lists it (its tool, arguments, reason,
        approvers, run): what the API shows and signs, addressed from `top`. None when it does not wait there."""
        chain = await self._chain(top, tool_call_id)
        if not chain:
            return None
        own_id = tool_call_id.rsplit("/", 1)[-1]
        waiting = await self.agent.prompt(chain[-1]).pending_approvals()
        found = next((p for p in waiting if p.tool_call_id == own_id and not p.path), None)
        return None if found is None else found.model_copy(update={"tool_call_id": tool_call_id, "path": chain})

    async def own_calls(self, top: Prompt, calls: list[PendingApproval]) -> list[PendingApproval]:
        """`calls` (a prompt's pending list) with every sub-agent's call replaced by its own prompt's view, and
        every call its running sub-agents wait for (a forged report can neither hide, invent nor relabel one)."""
        own = [call for call in calls if not call.path]
        for entry in top.output:
            if isinstance(entry, ToolOutput) and entry.child_prompt_id and entry.finished_at is None:
                child = self.agent.prompt(entry.child_prompt_id)
                try:
                    record, waiting = await child.get(), await child.pending_approvals()
                except RPCError:
                    continue
                for call in await self.own_calls(record, waiting):
                    own.append(call.model_copy(update={"tool_call_id": f"{entry.id}/{call.tool_call_id}",
                                                       "path": [entry.child_prompt_id, *call.path]}))
        return own

    # --- deciding --------------------------------------------------------------------------------

    async def decide(self, principal: Principal, prompt_id: str, tool_call_id: str, kind: DecisionKind, *,
                     corrected: dict[str, JsonValue] | None = None, reason: str | None = None) -> ToolOutput:
        # Not `self.prompt`: a person the call's approvers name may decide it without seeing the whole prompt.
        handle = self.agent.prompt(prompt_id)
        prompt = await temporal_call(handle.get, missing="unknown-prompt", detail=f"no prompt {prompt_id!r}")
        sub_agent_call = "/" in tool_call_id  # a sub-agent's call, listed and decided through this prompt
        # A sub-agent's call as its own prompt has it, never the copy a (forgeable) report gave this prompt.
        pending = await self.own_call(prompt, tool_call_id) if sub_agent_call else next(
            (p for p in await handle.pending_approvals() if p.tool_call_id == tool_call_id), None)
        named_somewhere = prompt.user_id == principal.id or principal.sees_everything
        if not named_somewhere:
            who = identity.Identity.of(principal.id, principal.roles)
            if pending is None or not identity.names(who, pending.approvers):
                raise Problem("not-allowed", f"prompt {prompt_id!r} belongs to another user")
        entry = prompt.tool_call(tool_call_id)
        if entry is None and not sub_agent_call:
            raise Problem("unknown-tool-call", f"prompt {prompt_id!r} has no tool call {tool_call_id!r}")
        if entry is not None and entry.decision is not None:
            raise _already_decided(entry)
        if pending is None or (entry is not None and not isinstance(entry.result, ApprovalRequest)):
            # Someone may have decided it since the record was read: say so rather than "not pending".
            latest = (await handle.get()).tool_call(tool_call_id)
            if latest is not None and latest.decision is not None:
                raise _already_decided(latest)
            raise Problem("not-pending", f"tool call {tool_call_id!r} is not waiting for a decision "
                                         f"(prompt {prompt.state})")
        if self.config.decision_private_key and not pending.signed_decisions:
            # A fleet misconfiguration (review 1.12): this API signs, the worker that planned the call had no
            # public key, so the call also accepts unsigned raw signals. Say so; `DAGENT_DECISIONS=signed` on
            # every worker prevents it.
            log.warning("decision on a call that does not require signed decisions", prompt_id=prompt_id,
                        tool_call_id=tool_call_id, fix="give every worker DAGENT_DECISION_PUBLIC_KEY and "
                                                       "DAGENT_DECISIONS=signed")
        refused = self.refusal(principal, prompt.user_id, pending, kind)
        if refused is not None:
            named = f"; approvers: {identity.describe(pending.approvers)}" if pending.approvers else ""
            raise Problem("not-allowed", f"{principal.id} may not decide {tool_call_id!r}: {refused}"
                          if refused == identity.FOUR_EYES_REFUSAL else f"{principal.id} may not decide "
                          f"{tool_call_id!r}{named}")
        if corrected is not None:  # a JSON merge patch: only the fields given change
            problem = schema_problem(merge_patch(pending.input, corrected), pending.input_schema)
            if problem:
                raise Problem("invalid-arguments", problem, schema=pending.input_schema)
        # The token names the prompt that waits and its own call id (a sub-agent's prompt checks it itself).
        waiting_prompt = pending.path[-1] if pending.path else prompt_id
        own_id = tool_call_id.rsplit("/", 1)[-1]
        token = self._token(principal, waiting_prompt, own_id, kind, corrected, pending)
        roles = sorted(principal.roles)  # counted by the prompt only without decision keys (else the token's)
        # A sub-agent's call is decided on the sub-agent's own prompt (which checks it), not through this prompt's
        # copy of its report: a forged report cannot hide it from its approvers.
        target = self.agent.prompt(waiting_prompt) if sub_agent_call else handle
        try:
            if kind == "approve":
                resolved = await target.approve(own_id, by=principal.id, input=corrected, wait=True, token=token,
                                                roles=roles)
            else:
                resolved = await target.reject(own_id, by=principal.id, reason=reason, wait=True, token=token,
                                               roles=roles)
        except DecisionRefused as exc:
            if exc.kind == "already-decided":  # lost a race: name who won when the record says
                latest = (await handle.get()).tool_call(tool_call_id)
                if latest is not None and latest.decision is not None:
                    raise _already_decided(latest) from exc
            raise Problem(exc.kind, str(exc)) from exc
        assert resolved is not None
        return resolved.model_copy(update={"id": tool_call_id})

    def _token(self, principal: Principal, prompt_id: str, tool_call_id: str, kind: DecisionKind,
               corrected: dict[str, JsonValue] | None, pending: PendingApproval) -> str | None:
        """A one-use token for exactly this decision: this run of the prompt, these arguments, a fresh nonce."""
        if not self.config.decision_private_key:
            return None
        arguments = merge_patch(pending.input, corrected) if corrected is not None else pending.input
        claims = DecisionClaims(sub=principal.id, roles=sorted(principal.roles), prompt=prompt_id, call=tool_call_id,
                                decision=kind, input_sha256=input_digest(corrected),
                                exp=int(time.time()) + self.config.decision_token_seconds,
                                run=pending.run_id, args_sha256=json_digest(arguments),
                                nonce=secrets.token_urlsafe(16), tool=pending.tool)
        return sign_decision(claims, self.config.decision_private_key)
