"""The approvals desk's durable paths (workflows/prompt/approvals.py, decision_checks.py) on a plain host: a call
waits for its decision, expires, is superseded by a user message; an update returns once its call is decided;
a correction goes to the tool's policy (an activity) first; the plugins hear of a request."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import ApprovalRequest, ToolOutput, ToolSuccess
from durable_agent.workflows.activity_refs import CHECK_CORRECTION, EMIT_EVENT
from durable_agent.workflows.prompt.approvals import ApprovalDesk, refusal_text
from durable_agent.workflows.prompt.steering import Steering
from durable_agent.workflows.protocol import (
    ApproveRequest,
    CallNeedingApproval,
    CorrectionVerdict,
    SteerRequest,
)
from tests.unit.conftest import PlainHost, activity_failure, context_of, fails


class Prompt:
    """A prompt's desk and steering on one plain host."""

    def __init__(self, host: PlainHost) -> None:
        context = context_of(host)
        self.record = context.record
        self.steering = Steering(context)
        self.desk = ApprovalDesk(context, steered=self.steering.arrived)

    def ask(self, call_id: str, **request: object) -> tuple[ToolOutput, ApprovalRequest]:
        call = CallNeedingApproval(id=call_id, tool="pay", input={"amount": 5},
                                   approval=ApprovalRequest(reason="money", **request))  # type: ignore[arg-type]
        entry = self.record.open_call(call)
        self.desk.request(entry, call)
        return entry, call.approval


async def test_a_call_nobody_decides_expires_and_is_rejected_as_expired(host: PlainHost) -> None:
    prompt = Prompt(host)
    entry, approval = prompt.ask("c1", expires_after=timedelta(seconds=60))
    asked_at = host.clock
    decision = await prompt.desk.wait(entry, approval)
    assert decision.decision == "expired" and decision.at - asked_at == host.clock - asked_at
    assert (host.clock - asked_at).total_seconds() == 60 and host.timers == ["approval expiry pay"]
    assert entry.decision == decision and not prompt.desk.waiting and prompt.record.prompt.state == "running"
    assert "approval expired" in refusal_text(decision)
    assert ("approval_decided", ("pay", "expired")) in host.metrics.calls
    assert prompt.desk.checks.problem("approve", ApproveRequest(tool_call_id="c1")) is not None  # too late


async def test_a_decision_that_arrives_while_the_call_waits_ends_the_wait_before_expiry(host: PlainHost) -> None:
    prompt = Prompt(host)
    entry, approval = prompt.ask("c1", expires_after=timedelta(seconds=60), approvers=["bob"])
    waiting = asyncio.ensure_future(prompt.desk.wait(entry, approval))
    await asyncio.sleep(0)
    assert prompt.desk.approve_signal(ApproveRequest(tool_call_id="c1", by="bob")) is None
    decision = await waiting
    assert (decision.decision, decision.by) == ("approved", "bob") and host.timers == []


async def test_a_user_message_supersedes_the_waiting_calls(host: PlainHost) -> None:
    prompt = Prompt(host)
    entry, approval = prompt.ask("c1")  # no expiry: it would wait for ever
    waiting = asyncio.ensure_future(prompt.desk.wait(entry, approval))
    await asyncio.sleep(0)
    assert prompt.steering.accept(SteerRequest(message="never mind, do something else")) is None
    decision = await waiting
    assert decision.decision == "superseded" and "new message" in refusal_text(decision)
    assert not prompt.desk.waiting and entry.decision == decision
    prompt.steering.deliver()
    assert prompt.record.prompt.output[-1].text == "never mind, do something else"  # type: ignore[union-attr]


async def test_an_approve_update_returns_the_call_once_decided_while_its_batch_still_waits(host: PlainHost) -> None:
    prompt = Prompt(host)
    prompt.ask("c1")
    prompt.ask("c2")
    shown = await prompt.desk.approve_call(({"tool_call_id": "c1", "by": "ann"},))
    assert shown.id == "c1" and shown.decision is not None and shown.decision.by == "ann"
    assert list(prompt.desk.waiting) == ["c2"]
    with pytest.raises(ApplicationError, match="already decided"):
        await prompt.desk.approve_call(({"tool_call_id": "c1", "by": "ann"},))


async def test_a_correction_is_taken_only_when_the_tools_policy_allows_the_approver(host: PlainHost) -> None:
    prompt = Prompt(host)
    prompt.ask("c1", approvers=["bob", "role:cfo"])
    checked: list[object] = []

    def policy(check: object) -> CorrectionVerdict:
        checked.append(check)
        return CorrectionVerdict(requirement=ApprovalRequest(reason="big", approvers=["role:cfo"]))

    host.answers[CHECK_CORRECTION.name] = policy
    with pytest.raises(ApplicationError, match="bob may not approve this correction of pay"):
        await prompt.desk.approve_call(({"tool_call_id": "c1", "by": "bob", "input": {"amount": 500}},))
    assert "c1" in prompt.desk.waiting and prompt.record.tool_call("c1").input == {"amount": 5}  # type: ignore[union-attr]
    assert [entry.kind for entry in prompt.record.prompt.audit] == ["ignored_correction"]
    update = asyncio.ensure_future(prompt.desk.approve_call(({"tool_call_id": "c1", "by": "cy", "roles": ["cfo"],
                                                              "input": {"amount": 500}},)))
    await asyncio.sleep(0)
    entry = prompt.record.tool_call("c1")
    assert entry is not None and entry.input == {"amount": 500} and not update.done()  # returns once it ran
    prompt.record.resolve(entry, ToolSuccess(output="paid"))  # as the conductor does when it runs the call
    shown = await update
    assert shown.result == ToolSuccess(output="paid") and shown.decision is not None
    assert (shown.decision.by, shown.decision.via, shown.decision.original_input) == ("cy", "role:cfo", {"amount": 5})
    assert [getattr(check, "input", None) for check in checked] == [{"amount": 500}] * 2


async def test_a_policy_that_cannot_run_refuses_the_correction_and_the_call_stays_pending(host: PlainHost) -> None:
    prompt = Prompt(host)
    prompt.ask("c1", approvers=["bob"])
    host.answers[CHECK_CORRECTION.name] = fails(activity_failure("plugin not loaded"))
    with pytest.raises(ApplicationError, match="the approval policy could not be run: plugin not loaded"):
        await prompt.desk.approve_call(({"tool_call_id": "c1", "by": "bob", "input": {"amount": 1}},))
    assert "c1" in prompt.desk.waiting and "c1" not in prompt.desk.decisions


async def test_the_plugins_hear_of_a_request_and_a_failed_delivery_does_not_fail_the_prompt(host: PlainHost) -> None:
    prompt = Prompt(host)
    entry, approval = prompt.ask("c1")
    await prompt.desk.announce(entry, approval)
    assert host.ran == []  # no plugin handles events: no activity
    prompt.desk.event_hooks = True
    delivered: list[object] = []
    host.answers[EMIT_EVENT.name] = delivered.append
    await prompt.desk.announce(entry, approval)
    [delivery] = delivered
    assert delivery.event.kind == EventKind.APPROVAL_REQUESTED and delivery.event.tool_call_id == "c1"  # type: ignore[attr-defined]
    host.answers[EMIT_EVENT.name] = fails(activity_failure("hook raised"))
    await prompt.desk.announce(entry, approval)  # logged, not raised
    assert len(host.ran) == 2
