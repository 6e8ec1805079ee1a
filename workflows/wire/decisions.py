"""What a prompt is told while it runs: steering, decisions on its waiting calls, a sub-agent's report, and
how it lists a waiting call.
"""

from __future__ import annotations

from pydantic import (
    Field,
    JsonValue,
)

from durable_agent.agent.models import ApprovalRequest, PromptRef
from durable_agent.agent.notify import NoticeSent
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)
from durable_agent.workflows.wire.inputs import MAX_INPUT_CHARS


class ChildApprovals(_Model):
    """A sub-agent's prompt tells its parent what it waits for (signal `child_approvals`)."""

    tool_call_id: str = Field(description="The parent's sub-agent call.")
    child_workflow_id: str
    pending: list[PendingApproval] = Field(default_factory=list)
    child_run_id: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                    description="The reporting run (checked by the parent).")
    nonce: str | None = Field(default=None, exclude_if=lambda v: v is None,
                             description="The parent's `ParentLink.report_nonce` for this child.")
    refused: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v, description=(
        "Decisions forwarded by the parent that this sub-agent refused: its call id -> why."))


class SteerRequest(_Model):
    message: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)


class ApproveRequest(_Model):
    tool_call_id: str
    by: str | None = None
    roles: list[str] = Field(default_factory=list, exclude_if=lambda roles: not roles, description=(
        "The decider's roles; trusted like `by` only without decision keys (signed: the token's roles count)."))
    input: dict[str, JsonValue] | None = Field(default=None, description="Corrected arguments.")
    token: str | None = Field(default=None, description="Signed decision token (workflows/decision_tokens.py); "
                                                        "required when the worker has a decision key.")


class RejectRequest(_Model):
    tool_call_id: str
    by: str | None = None
    roles: list[str] = Field(default_factory=list, exclude_if=lambda roles: not roles,
                             description="See ApproveRequest.roles.")
    reason: str | None = None
    token: str | None = Field(default=None, description="Signed decision token; see ApproveRequest.token.")


class PendingApproval(ApprovalRequest, PromptRef):
    """A call waiting for a decision, the one view of it that the desk lists, the memo keeps, a sub-agent
    reports, the client lists and the API serves: the prompt it is decided on (flat), the call, its approval
    request as it waits (flat: reason, approvers, requested_at, expires_at, ...) and where it waits."""

    tool_call_id: str
    tool: str
    input: JsonValue
    input_schema: dict[str, JsonValue] | None = Field(default=None, description="JSON schema of the arguments.")
    path: list[str] = Field(default_factory=list, description="Prompt ids from this prompt to the one that waits "
                                                             "(empty: this prompt itself); a sub-agent's call.")
    run_id: str | None = Field(default=None, exclude_if=lambda v: v is None,
                               description="The run of the prompt that waits (decision tokens name it).")
    undelivered: list[NoticeSent] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "The steps telling people of the call that could not be delivered (docs/telling-approvers.md)."))
    plugin: str | None = Field(default=None, exclude=True, description=(
        "The tool's plugin, where its policy runs again on a correction (the waiting prompt's own; not listed)."))

    def request(self) -> ApprovalRequest:
        """Its approval request alone, as the record's pending result holds it: a plain `ApprovalRequest`, since
        how a subclass in that field serializes differs between pydantic releases (2.12 writes every field)."""
        return ApprovalRequest(**{name: getattr(self, name) for name in ApprovalRequest.model_fields})


ChildApprovals.model_rebuild()
