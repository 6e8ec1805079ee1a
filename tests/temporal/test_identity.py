"""Identities and roles: typed approvers, the bare-name rule, who sees and decides a call (API, `dagent pending`),
and a property test of the decision logic against a tiered policy (no call runs with arguments its decider was
not allowed to approve)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.identity import FOUR_EYES_REFUSAL, Identity, grant, may_decide, names, person_problem
from durable_agent.agent.tools import Approval
from durable_agent.api.config import ApiKey
from durable_agent.client.pending import may_see
from durable_agent.workflows.corrections import correction_refusal, merge_patch
from durable_agent.workflows.protocol import PendingApproval
from tests.support.api import USERS, api_stack


def test_typed_entries_never_confuse_users_and_roles() -> None:
    finance_person = Identity.of("finance")  # a principal whose id is a role's name (review 1.8)
    fiona = Identity.of("fiona", ["finance"])
    assert grant(finance_person, ["role:finance"]) is None
    assert grant(fiona, ["role:finance"]) == "role:finance"
    assert grant(fiona, ["user:finance"]) is None
    assert grant(Identity.of("alice"), ["alice", "role:finance"]) == "user:alice"  # bare = user
    assert grant(fiona, ["finance"]) is None  # a bare name is never a role
    assert grant(Identity.of("user:alice"), ["user:alice"]) == "user:alice"
    assert grant(Identity.of("anyone"), None) == "*" and grant(Identity.of("anyone"), []) == "*"


def test_a_role_is_never_a_decider_and_four_eyes_binds_the_owner() -> None:
    assert person_problem("role:finance") is not None and person_problem("user:alice") is None
    assert may_decide(Identity.of("role:finance", ["finance"]), ["role:finance"]) is not None
    olga = Identity.of("olga", ["finance"])
    assert may_decide(olga, ["role:finance"], owner="olga", four_eyes=True) == FOUR_EYES_REFUSAL
    assert may_decide(olga, ["role:finance"], owner="olga", four_eyes=True, approving=False) is None
    assert may_decide(olga, ["role:finance"], owner="olga") is None


def _row(owner: str, approvers: list[str] | None) -> PendingApproval:
    return PendingApproval(prompt_id="p", user_id=owner, tool_call_id="c1", tool="t", input={}, reason="r",
                           requested_at="2026-01-01T00:00:00Z", approvers=approvers)  # type: ignore[arg-type]


def test_who_sees_a_pending_call() -> None:
    fin = Identity.of("fin", ["finance"])
    assert may_see(_row("alice", ["role:finance"]), fin)
    assert not may_see(_row("alice", ["finance"]), fin)  # the user `finance`, not the role
    assert not may_see(_row("alice", None), fin) and may_see(_row("alice", None), fin, sees_everything=True)
    assert may_see(_row("fin", None), fin)
    assert not names(Identity.of("finance"), ["role:finance"])


# --- the property: no call runs with arguments its decider was not allowed to approve ------------------

OWNER = "olga"
PEOPLE = ["alice", "bob", "cfo", "finance", OWNER, "user:alice", "role:finance", "role:cfo"]
ROLES = ["finance", "cfo", "approver", "alice"]


def tiered(args: dict[str, Any]) -> Approval | None:
    """The review's two-tier payment policy, plus a recipient rule."""
    amount = float(args.get("amount", 0))
    if args.get("to") == "mallory-offshore":
        return Approval(approvers=["user:cfo"], four_eyes=True)
    if amount <= 100:
        return None
    if amount <= 1000:
        return Approval(approvers=["alice", "role:finance"])
    return Approval(approvers=["role:cfo"], four_eyes=True)


def oracle_allows(person: str, roles: set[str], approval: Approval | None) -> bool:
    """Written from the documented rule, independently of agent/identity.py."""
    if approval is None:
        return True
    if person.startswith("role:"):
        return False
    who = person.removeprefix("user:")
    if approval.four_eyes and who == OWNER:
        return False
    for entry in approval.approvers or []:
        if entry.startswith("role:") and entry[5:] in roles:
            return True
        if not entry.startswith("role:") and entry.removeprefix("user:") == who:
            return True
    return not approval.approvers


def decide(person: str, roles: set[str], model_args: dict[str, Any], patch: dict[str, Any] | None) -> bool:
    """The workflow's sequence: the decider is checked against the call's requirement; a correction is merged
    and the policy's answer for it checked with `correction_refusal`. True: the call runs."""
    who = Identity.of(person, roles)
    original = tiered(model_args)
    assert original is not None
    if may_decide(who, original.approvers, owner=OWNER, four_eyes=bool(original.four_eyes)) is not None:
        return False
    if patch is None:
        return True
    needed = tiered(merge_patch(model_args, patch))  # type: ignore[arg-type]
    refusal = correction_refusal(Identity.of(person.removeprefix("user:"), roles),
                                 needed.approvers if needed else None, needs_approval=needed is not None,
                                 owner=OWNER, four_eyes=bool(original.four_eyes or (needed and needed.four_eyes)))
    return refusal is None


amounts = st.one_of(st.integers(min_value=0, max_value=2_000_000), st.sampled_from([100, 101, 1000, 1001]))
patches = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "amount": amounts, "to": st.sampled_from(["acme", "mallory-offshore", "bob"])}))


@settings(max_examples=3000, deadline=None)
@given(person=st.sampled_from(PEOPLE), roles=st.sets(st.sampled_from(ROLES)),
       amount=st.integers(min_value=101, max_value=5000), to=st.sampled_from(["acme", "mallory-offshore"]),
       patch=patches)
def test_no_call_runs_with_arguments_its_decider_may_not_approve(person: str, roles: set[str], amount: int,
                                                                 to: str, patch: dict[str, Any] | None) -> None:
    model_args = {"to": to, "amount": amount}
    final = merge_patch(model_args, patch) if patch is not None else model_args
    runs = decide(person, roles, model_args, patch)
    allowed = oracle_allows(person, roles, tiered(model_args)) and oracle_allows(person, roles, tiered(final))  # type: ignore[arg-type]
    assert runs == allowed, (person, roles, model_args, patch)


# --- through the API: a role named in the approvers lets its holders see and decide the call ----------

async def test_role_holders_see_and_decide_without_the_global_role(dev_env: WorkflowEnvironment) -> None:
    """Review 1.7/1.8: `fin` holds only `finance`; the vault tool names `role:finance`. `finance` is a user
    whose id equals the role's name. Neither holds the global approver role."""
    extra = [ApiKey(principal="fin", key="fin-only-finance-key-0123456", roles=["finance"]),
             ApiKey(principal="finance", key="finance-named-user-key-01234", roles=[])]
    async with api_stack(dev_env, extra_api_keys=extra) as stack:
        async with stack.http("alice") as http:
            started = await http.post("/prompts", json={"input": "open vault b9"})
            prompt_id = started.json()["id"]
        waiting = await stack.agent.prompt(prompt_id).wait_until("waiting_for_approval")
        call_id = waiting.output[0].id  # type: ignore[union-attr]
        headers = {"Authorization": "Bearer fin-only-finance-key-0123456"}
        async with stack.http(headers=headers) as fin:
            items: list[dict[str, Any]] = []
            for _ in range(100):  # visibility is eventually consistent
                items = [p for p in (await fin.get("/approvals")).json() if p["prompt_id"] == prompt_id]
                if items:
                    break
                await asyncio.sleep(0.1)
            assert items and items[0]["can_decide"] is True, items
            assert (await fin.get(f"/prompts/{prompt_id}")).status_code == 403  # the call, not the whole prompt
        async with stack.http(headers={"Authorization": "Bearer finance-named-user-key-01234"}) as impostor:
            assert all(p["prompt_id"] != prompt_id for p in (await impostor.get("/approvals")).json())
            refused = await impostor.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")
            assert refused.status_code == 403, refused.text
        async with stack.http(headers=headers) as fin:
            ok = await fin.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")
            assert ok.status_code == 200, ok.text
            decision = ok.json()["decision"]
            assert decision["by"] == "fin" and decision["via"] == "role:finance", decision
    assert "fin" not in USERS
