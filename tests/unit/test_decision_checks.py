"""DecisionChecks (workflows/prompt/decision_checks.py) on a plain host: with a decision key, who decides is the
signed token's principal and roles, bound to this run, call, tool and arguments, each nonce accepted once; a
decision on a sub-agent's call gets the checks this prompt can make before it is forwarded."""

from __future__ import annotations

from datetime import timedelta

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from durable_agent.agent.models import ApprovalRequest
from durable_agent.workflows.decision_tokens import DecisionClaims, sign_decision
from durable_agent.workflows.prompt.approvals import ApprovalDesk
from durable_agent.workflows.prompt.sub_agents import Child
from durable_agent.workflows.protocol import (
    ApproveRequest,
    CallNeedingApproval,
    ChildApprovals,
    PendingApproval,
    ReadyCall,
    RejectRequest,
    SubAgentCall,
)
from durable_agent.workflows.transcript import json_digest
from tests.unit.conftest import PlainHost, context_of

KEY = Ed25519PrivateKey.generate()
PRIVATE_PEM = KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
PUBLIC_PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
ARGS = {"amount": 5}


def _signed_desk(host: PlainHost, *call_ids: str) -> ApprovalDesk:
    context = context_of(host)
    desk = ApprovalDesk(context, steered=lambda: False)
    for call_id in call_ids:
        call = CallNeedingApproval(id=call_id, tool="pay", input=ARGS, approval=ApprovalRequest(
            reason="money", approvers=["role:finance"], decision_key=PUBLIC_PEM))
        desk.request(context.record.open_call(call), call)
    return desk


def _token(host: PlainHost, call_id: str, *, nonce: str = "n-1", by: str = "fay", run: str = "run-1",
           roles: tuple[str, ...] = ("finance",)) -> str:
    claims = DecisionClaims(sub=by, roles=list(roles), prompt=host.workflow_id, call=call_id, decision="approve",
                            exp=int(host.clock.timestamp()) + 120, run=run, args_sha256=json_digest(ARGS),
                            nonce=nonce, tool="pay")
    return sign_decision(claims, PRIVATE_PEM)


def _refused(desk: ApprovalDesk, request: ApproveRequest) -> str:
    refusal = desk.checks.problem("approve", request)
    assert refusal is not None and refusal.kind == "not-allowed"
    return refusal.message


def test_with_a_decision_key_only_a_token_for_this_run_call_and_person_decides(host: PlainHost) -> None:
    desk = _signed_desk(host, "c1")
    assert "token is required" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay", roles=["finance"]))
    assert "another call" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay", token=_token(host, "c9")))
    assert "another run" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay",
                                                          token=_token(host, "c1", run="run-0")))
    assert "issued to 'fay'" in _refused(desk, ApproveRequest(tool_call_id="c1", by="eve", token=_token(host, "c1")))
    no_role = _token(host, "c1", roles=())  # the roles come from the token, not from the request
    assert "role:finance" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay", roles=["finance"],
                                                           token=no_role))
    forged = _token(host, "c1")[:-4] + "AAAA"
    assert "not valid" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay", token=forged))
    issued = _token(host, "c1")
    host.clock += timedelta(minutes=3)  # the workflow's clock decides, not the wall clock
    assert "expired" in _refused(desk, ApproveRequest(tool_call_id="c1", by="fay", token=issued))


def test_a_tokens_nonce_is_used_up_by_the_decision_it_allowed(host: PlainHost) -> None:
    desk = _signed_desk(host, "c1", "c2")
    assert desk.approve_signal(ApproveRequest(tool_call_id="c1", by="fay", token=_token(host, "c1"))) is None
    decision = desk.decisions["c1"]
    assert (decision.decision, decision.by, decision.via) == ("approved", "fay", "role:finance")
    assert "already used" in _refused(desk, ApproveRequest(tool_call_id="c2", by="fay", token=_token(host, "c2")))
    assert desk.checks.problem("approve", ApproveRequest(tool_call_id="c2", by="fay",
                                                         token=_token(host, "c2", nonce="n-2"))) is None


def test_a_decision_on_a_sub_agents_call_is_checked_here_before_it_is_forwarded(host: PlainHost) -> None:
    context = context_of(host)
    desk = ApprovalDesk(context, steered=lambda: False)
    entry = context.record.open_call(ReadyCall(id="a", tool="helper", agent=SubAgentCall(instructions="x")))
    entry.child_prompt_id = "wf-1.a.x"
    desk.children._children["a"] = Child(workflow_id="wf-1.a.x", nonce="k")  # as SubAgents.run notes it
    child = {"prompt_id": "wf-1.a.x", "user_id": "owner"}
    rows = [PendingApproval(**child, tool_call_id="s", tool="pay", input=ARGS, reason="money",
                            requested_at=host.clock, decision_key=PUBLIC_PEM),
            PendingApproval(**child, tool_call_id="p", tool="pay", input=ARGS, reason="money",
                            requested_at=host.clock, approvers=["bob"])]
    report = ChildApprovals(tool_call_id="a", child_workflow_id="wf-1.a.x", pending=rows, nonce="k")
    assert desk.children.accept_report(report) is None
    assert "token is required" in _refused(desk, ApproveRequest(tool_call_id="a/s", by="bob"))
    assert desk.checks.problem("approve", ApproveRequest(tool_call_id="a/s", by="bob", token="t")) is None
    assert "decision on 'a/p' refused" in _refused(desk, ApproveRequest(tool_call_id="a/p", by="eve"))
    assert desk.reject_signal(RejectRequest(tool_call_id="a/p", by="bob")) is None
    assert "a/p" not in desk.decisions  # forwarded: the sub-agent takes it
