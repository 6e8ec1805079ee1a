"""The approval policy holds through corrections (review 1.6): a corrected input goes back to the tool's policy
before the approval is taken, through every door (HTTP, raw Temporal updates and signals, the CLI); the
four-eyes rule, per policy and deployment-wide."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import Prompt, ToolOutput
from durable_agent.client import DecisionRefused
from durable_agent.workflows import names
from tests.support.policy import CFO_KEY, FIN_KEY, LEDGER, policy_stack

OFFSHORE = {"amount": 999999, "to": "mallory-offshore"}


async def _waiting(stack: Any, user: str, text: str) -> tuple[str, list[ToolOutput]]:
    handle = await stack.agent.start(text, user_id=user)
    prompt = await handle.wait_until("waiting_for_approval")
    assert prompt.state == "waiting_for_approval", prompt
    return handle.id, [o for o in prompt.output if isinstance(o, ToolOutput)]


async def _record(stack: Any, prompt_id: str) -> Prompt:
    return await stack.agent.prompt(prompt_id).get()  # type: ignore[no-any-return]


async def test_a_correction_the_policy_routes_elsewhere_is_refused_over_http(dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env) as stack:
        prompt_id, [call] = await _waiting(stack, "olga", "pay acme 70")
        assert call.result.approvers == ["alice", "role:finance"]  # type: ignore[union-attr]
        url = f"/prompts/{prompt_id}/approvals/{call.id}/approve"
        async with stack.http("alice") as alice:
            refused = await alice.post(url, json={"input": OFFSHORE})
            assert refused.status_code == 403, refused.text
            assert "user:cfo" in refused.json()["detail"] and "\n" not in refused.json()["detail"]
            record = await _record(stack, prompt_id)
            assert record.state == "waiting_for_approval" and not [e for e in LEDGER if e[0] == "mallory-offshore"]
            assert any(a.kind == "ignored_correction" and "user:cfo" in a.detail for a in record.audit), record.audit
            ok = await alice.post(url, json={"input": {"amount": 900, "memo": "fixed"}})
            assert ok.status_code == 200, ok.text
        entry = ok.json()
        assert entry["result"]["output"] == {"sent": 900.0, "to": "acme"}
        assert entry["decision"]["by"] == "alice" and entry["decision"]["via"] == "user:alice"
        assert entry["decision"]["original_input"] == {"to": "acme", "amount": 70}
        assert entry["input"] == {"to": "acme", "amount": 900, "memo": "fixed"}


async def test_raw_updates_and_signals_with_a_correction_go_through_the_policy(dev_env: WorkflowEnvironment) -> None:
    """Open mode (no decision keys), the raw SDK as the attacker: `by` is trusted, the policy still holds."""
    async with policy_stack(dev_env, signed=False) as stack:
        prompt_id, [call] = await _waiting(stack, "olga", "pay acme 70")
        raw = stack.agent.client.get_workflow_handle(prompt_id)
        try:
            await raw.execute_update(names.APPROVE_CALL_UPDATE,
                                     {"tool_call_id": call.id, "by": "alice", "input": OFFSHORE})
            raise AssertionError("a correction beyond alice's tier was approved")
        except WorkflowUpdateFailedError as exc:
            assert "need approval by user:cfo" in str(exc.cause), exc.cause
        await raw.signal(names.APPROVE_SIGNAL, {"tool_call_id": call.id, "by": "alice", "input": OFFSHORE})
        for by in ("role:finance", "cfo"):  # a role is never a decider; the cfo is not named for 70
            try:
                await stack.agent.prompt(prompt_id).approve(call.id, by=by, wait=True)
                raise AssertionError(f"{by} approved")
            except DecisionRefused as exc:
                assert exc.kind == "not-allowed", exc
        for _ in range(100):
            record = await _record(stack, prompt_id)
            if sum(a.kind == "ignored_correction" for a in record.audit) >= 2:
                break
            await asyncio.sleep(0.1)
        assert record.state == "waiting_for_approval", record
        assert sum(a.kind == "ignored_correction" for a in record.audit) >= 2, record.audit
        # A person holding the named role (trusted like `by` without keys) with a correction down to no approval.
        resolved = await stack.agent.prompt(prompt_id).approve(call.id, by="fin", roles=["finance"],
                                                               input={"amount": 5}, wait=True)
        assert resolved is not None and resolved.result is not None and resolved.result.type == "success"
        assert resolved.decision is not None and resolved.decision.via == "role:finance"
        assert ("acme", 5.0) in [(to, amount) for to, amount, _ in LEDGER]
        assert not [e for e in LEDGER if e[0] == "mallory-offshore" or e[1] == 999999]


async def test_the_named_approver_of_the_new_tier_may_approve_their_own_tier(dev_env: WorkflowEnvironment) -> None:
    """A correction that stays within the decider's tier runs; fin (role finance) approves 700 -> 800."""
    async with policy_stack(dev_env) as stack:
        prompt_id, [call] = await _waiting(stack, "olga", "pay acme 700")
        async with stack.http(headers={"Authorization": f"Bearer {FIN_KEY}"}) as fin:
            over = await fin.post(f"/prompts/{prompt_id}/approvals/{call.id}/approve", json={"input": {"amount": 5000}})
            assert over.status_code == 403 and "user:cfo" in over.json()["detail"], over.text
            ok = await fin.post(f"/prompts/{prompt_id}/approvals/{call.id}/approve", json={"input": {"amount": 800}})
            assert ok.status_code == 200, ok.text
            assert ok.json()["decision"]["via"] == "role:finance" and ok.json()["decision"]["by"] == "fin"
        async with stack.http(headers={"Authorization": f"Bearer {CFO_KEY}"}) as cfo:  # named for the top tier only
            prompt_id, [call] = await _waiting(stack, "olga", "pay acme 90")
            assert (await cfo.post(f"/prompts/{prompt_id}/approvals/{call.id}/approve")).status_code == 403


async def test_four_eyes_per_policy_and_deployment_wide(dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env) as stack:
        prompt_id, [call] = await _waiting(stack, "alice", "sign the books")
        async with stack.http("alice") as alice:
            own = await alice.post(f"/prompts/{prompt_id}/approvals/{call.id}/approve")
            assert own.status_code == 403 and "four-eyes" in own.json()["detail"], own.text
        async with stack.http("ann") as ann:
            assert (await ann.post(f"/prompts/{prompt_id}/approvals/{call.id}/approve")).status_code == 200
    async with policy_stack(dev_env, signed=False, four_eyes=True) as stack:
        prompt_id, [call] = await _waiting(stack, "alice", "open the door")
        try:
            await stack.agent.prompt(prompt_id).approve(call.id, by="alice", wait=True)
            raise AssertionError("the prompt's own user approved under the deployment's four-eyes rule")
        except DecisionRefused as exc:
            assert "four-eyes" in str(exc)
        rejected = await stack.agent.prompt(prompt_id).reject(call.id, by="alice", reason="no", wait=True)
        assert rejected is not None and rejected.decision is not None and rejected.decision.decision == "rejected"


async def _dagent(stack: Any, *args: str) -> tuple[int, str]:
    target = stack.agent.client.service_client.config.target_host
    env = {**os.environ, "DAGENT_TASK_QUEUE": stack.agent.settings.task_queue}  # the deployment's CLI
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "durable_agent.cli", *args, "--address", target, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode()


async def test_the_cli_records_a_person_and_its_corrections_go_through_the_policy(
        dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env, signed=False) as stack:
        prompt_id, [call] = await _waiting(stack, "olga", "pay acme 70")
        code, out = await _dagent(stack, "approve", prompt_id, call.id, "--by", "role:finance")
        assert code != 0 and "names a role" in out, out
        code, out = await _dagent(stack, "approve", prompt_id, call.id, "--by", "alice", "--input",
                                  '{"amount": 999999, "to": "mallory-offshore"}')
        assert code != 0 and "user:cfo" in out, out
        assert (await _record(stack, prompt_id)).state == "waiting_for_approval"
        code, out = await _dagent(stack, "pending", "--as", "fin", "--role", "finance", "--json")
        assert code == 0 and call.id in out and prompt_id in out, out
        code, out = await _dagent(stack, "pending", "--as", "finance", "--json")  # the user, not the role
        assert code == 0 and prompt_id not in out, out
        code, out = await _dagent(stack, "approve", prompt_id, call.id, "--by", "user:fin", "--role", "finance")
        assert code == 0, out
        decided = (await _record(stack, prompt_id)).tool_call(call.id)
        assert decided is not None and decided.decision is not None
        assert (decided.decision.by, decided.decision.via) == ("fin", "role:finance")
