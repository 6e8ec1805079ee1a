"""The approvals desk (workflows/prompt/approvals.py): waiting calls, checks before a decision, decisions taken."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import ApprovalRequest, Decision, Prompt
from durable_agent.workflows.prompt.approvals import ApprovalDesk, refusal_text
from durable_agent.workflows.protocol import (
    ApproveRequest,
    CallNeedingApproval,
    ReadyCall,
    RejectRequest,
)
from tests.unit.conftest import PlainHost, context_of

SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


def _desk(host: PlainHost) -> ApprovalDesk:
    return ApprovalDesk(context_of(host), steered=lambda: False)


def _ask(desk: ApprovalDesk, call_id: str, input_schema: dict[str, object] | None = None, **request: object) -> None:
    call = CallNeedingApproval(id=call_id, tool="pay", input={"amount": 5}, input_schema=input_schema,  # type: ignore[arg-type]
                               approval=ApprovalRequest(reason="money", **request))  # type: ignore[arg-type]
    desk.request(desk._record.open_call(call), call)


def test_a_request_makes_the_call_pending_in_place_and_says_so(host: PlainHost) -> None:
    desk = _desk(host)
    _ask(desk, "c1", expires_after=timedelta(hours=1), approvers=["bob"])
    entry = desk._record.tool_call("c1")
    # the record holds the request itself, not the listing view: a subclass there is written whole by pydantic 2.12
    assert entry is not None and type(entry.result) is ApprovalRequest
    assert Prompt.model_validate_json(desk._record.prompt.model_dump_json()) == desk._record.prompt
    assert entry.result.expires_at is not None and (entry.result.expires_at - host.clock).total_seconds() == 3600
    assert desk._record.prompt.state == "waiting_for_approval"
    assert host.events[-1].kind == EventKind.APPROVAL_REQUESTED and host.events[-1].index == 0
    [row] = desk.listed()
    assert (row.tool_call_id, row.approvers, row.run_id) == ("c1", ["bob"], "run-1")
    assert host.memos and host.details and ("approval_requested", ("pay",)) in host.metrics.calls


def test_an_approval_is_checked_then_taken_and_a_correction_waits_for_the_policy(host: PlainHost) -> None:
    desk = _desk(host)
    _ask(desk, "c1", approvers=["bob"], input_schema=SCHEMA)
    unknown = desk.checks.problem("approve", ApproveRequest(tool_call_id="zz", by="bob"))
    assert unknown is not None and unknown.kind == "unknown-tool-call" and "'c1'" in unknown.message
    stranger = desk.approve_signal(ApproveRequest(tool_call_id="c1", by="eve"))
    assert stranger is not None and stranger.kind == "not-allowed"
    bad = desk.approve_signal(ApproveRequest(tool_call_id="c1", by="bob", input={"amount": "lots"}))
    assert bad is not None and bad.kind == "invalid-arguments"
    assert "c1" not in desk.decisions  # refused decisions change nothing
    assert desk.approve_signal(ApproveRequest(tool_call_id="c1", by="bob", input={"amount": 3})) is None
    assert "c1" not in desk.decisions  # a correction is taken once the tool's policy (an activity) agrees
    assert desk._record.tool_call("c1").input == {"amount": 5}  # type: ignore[union-attr]
    assert desk.approve_signal(ApproveRequest(tool_call_id="c1", by="bob")) is None
    decision = desk.decisions["c1"]
    assert (decision.decision, decision.by, decision.via) == ("approved", "bob", "user:bob")
    again = desk.checks.problem("reject", RejectRequest(tool_call_id="c1", by="bob"))
    assert again is not None and again.kind == "already-decided"


def test_a_decision_is_on_its_entry_when_it_arrives(host: PlainHost) -> None:
    desk = _desk(host)
    _ask(desk, "c1")
    _ask(desk, "c2")
    assert desk.approve_signal(ApproveRequest(tool_call_id="c1", by="alice")) is None
    entry = desk._record.tool_call("c1")
    assert entry is not None and entry.decision is not None and entry.decision.by == "alice"
    assert isinstance(entry.result, ApprovalRequest)  # it runs after the batch
    assert list(desk.waiting) == ["c2"] and [row.tool_call_id for row in desk.listed()] == ["c2"]
    assert host.events[-1].kind == EventKind.OUTPUT_UPDATED and host.events[-1].output == entry


def test_a_batch_stays_waiting_until_its_last_call_is_settled(host: PlainHost) -> None:
    desk = _desk(host)
    _ask(desk, "c1")
    _ask(desk, "c2")
    assert desk.reject_signal(RejectRequest(tool_call_id="c1", by="ann", reason="no")) is None
    first = desk._record.tool_call("c1")
    assert first is not None and first.decision is not None and first.decision.by == "ann"
    assert list(desk.waiting) == ["c2"] and desk._record.prompt.state == "waiting_for_approval"
    assert host.events[-1].kind == EventKind.OUTPUT_UPDATED and host.events[-1].index == 0
    assert [row.tool_call_id for row in desk.listed()] == ["c2"]
    second = desk.entry(desk.waiting["c2"])
    desk.settle(second, Decision(decision="expired", at=host.clock, reason="approval expired"))
    assert not desk.waiting and desk._record.prompt.state == "running" and desk.listed() == []


def test_under_the_policy_the_prompts_own_user_may_not_approve_a_four_eyes_call(host: PlainHost) -> None:
    desk = _desk(host)
    _ask(desk, "c1", approvers=["user:owner", "role:finance"], four_eyes=True)
    own = desk.checks.problem("approve", ApproveRequest(tool_call_id="c1", by="owner"))
    assert own is not None and own.kind == "not-allowed" and "four-eyes" in own.message
    assert desk.checks.problem("reject", RejectRequest(tool_call_id="c1", by="owner")) is None
    assert desk.approve_signal(ApproveRequest(tool_call_id="c1", by="user:fay", roles=["finance"])) is None
    assert (desk.decisions["c1"].by, desk.decisions["c1"].via) == ("fay", "role:finance")


def test_a_prompt_that_is_not_waiting_refuses_every_decision(host: PlainHost) -> None:
    desk = _desk(host)
    desk._record.open_call(ReadyCall(id="c1", tool="pay"))
    refusal = desk.checks.problem("approve", ApproveRequest(tool_call_id="c1"))
    assert refusal is not None and refusal.kind == "not-pending"
    with pytest.raises(Exception, match="has no tool call 'zz'"):
        desk.checked_request(({"tool_call_id": "zz"},), ApproveRequest)


@pytest.mark.parametrize(("kind", "by", "reason", "text"), [
    ("expired", None, None, "approval expired"),
    ("superseded", None, None, "the user sent a new message"),
    ("rejected", "bob", "too much", "The call was rejected by bob: too much"),
])
def test_the_model_reads_why_a_call_did_not_run(host: PlainHost, kind: str, by: str | None, reason: str | None,
                                                text: str) -> None:
    assert text in refusal_text(Decision(decision=kind, by=by, reason=reason, at=host.clock))  # type: ignore[arg-type]
