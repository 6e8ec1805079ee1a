"""Decision tokens are good for one decision (review 1.5), sub-agent decisions and reports are verified before
the parent changes its list (review 1.10), and idempotency keys differ between runs that reuse a workflow id.
The attacker holds the raw Temporal SDK: they can read history, start runs, send any update or signal."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.workflows import names
from durable_agent.workflows.decision_tokens import DecisionClaims, sign_decision
from durable_agent.workflows.transcript import json_digest
from tests.support.policy import LEDGER, policy_stack


async def _captured_tokens(client: Any, workflow_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every approve_call request in a run's history, as an attacker with read access sees it."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    found = []
    for event in history.events:
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == names.APPROVE_CALL_UPDATE:
                found.append(json.loads(request.input.args.payloads[0].data))
    return found


async def _refused(raw: Any, payload: dict[str, Any]) -> str:
    try:
        await raw.execute_update(names.APPROVE_CALL_UPDATE, payload)
    except WorkflowUpdateFailedError as exc:
        return str(exc.cause)
    raise AssertionError(f"accepted: {payload}")


async def test_a_captured_token_is_refused_on_a_new_run_with_the_same_prompt_id(dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env) as stack:
        prompt_id = f"replay-{secrets.token_hex(4)}"
        first = await stack.agent.start("pay acme 50", user_id="alice", prompt_id=prompt_id)
        call_id = (await first.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        async with stack.http("alice") as alice:
            assert (await alice.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")).status_code == 200
        done = await first.result()
        first_run = (await stack.agent.client.get_workflow_handle(prompt_id).describe()).run_id
        [captured] = await _captured_tokens(stack.agent.client, prompt_id, first_run)
        assert captured["token"] and captured["by"] == "alice"
        # The same prompt id again, the same model arguments (so the same call id and argument digest).
        second = await stack.agent.start("pay acme 50", user_id="mallory", prompt_id=prompt_id,
                                         id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE)
        waiting = await second.wait_until("waiting_for_approval")
        assert waiting.output[0].id == call_id  # type: ignore[union-attr]
        raw = stack.agent.client.get_workflow_handle(prompt_id)
        reason = await _refused(raw, captured)
        assert "another run" in reason, reason
        assert (await second.get()).state == "waiting_for_approval" and done.state == "completed"
        assert sum(1 for to, amount, _ in LEDGER if to == "acme" and amount == 50) >= 1


def _token(stack: Any, prompt_id: str, run_id: str, call_id: str, args: Any, nonce: str, by: str = "alice",
           tool: str = "pay.send") -> str:
    claims = DecisionClaims(sub=by, roles=[], prompt=prompt_id, call=call_id, decision="approve",
                            exp=int(time.time()) + 120, run=run_id, args_sha256=json_digest(args), nonce=nonce,
                            tool=tool)
    return sign_decision(claims, stack.private_pem)


async def test_a_nonce_is_accepted_once_and_a_token_binds_the_exact_arguments(dev_env: WorkflowEnvironment) -> None:
    """The attacker holds valid signing for alice (say, tokens the API issued); each works once, for its args."""
    async with policy_stack(dev_env) as stack:
        handle = await stack.agent.start("pay acme 50; pay bob 60", user_id="olga")
        prompt = await handle.wait_until("waiting_for_approval")
        first, second = [o for o in prompt.output if isinstance(o, ToolOutput)]
        pending = {p.tool_call_id: p for p in await handle.pending_approvals()}
        run_id = pending[first.id].run_id
        assert run_id == (await stack.agent.client.get_workflow_handle(handle.id).describe()).run_id
        raw = stack.agent.client.get_workflow_handle(handle.id)
        nonce = secrets.token_urlsafe(12)
        ok = _token(stack, handle.id, run_id, first.id, first.input, nonce)
        await raw.execute_update(names.APPROVE_CALL_UPDATE, {"tool_call_id": first.id, "by": "alice", "token": ok})
        reused = _token(stack, handle.id, run_id, second.id, second.input, nonce)
        assert "already used" in await _refused(raw, {"tool_call_id": second.id, "by": "alice", "token": reused})
        other_args = _token(stack, handle.id, run_id, second.id, {"to": "mallory", "amount": 60},
                            secrets.token_urlsafe(12))
        assert "other arguments" in await _refused(
            raw, {"tool_call_id": second.id, "by": "alice", "token": other_args})
        other_tool = _token(stack, handle.id, run_id, second.id, second.input, secrets.token_urlsafe(12),
                            tool="weather.get")  # the approver was shown another tool (issue 41)
        assert "another tool" in await _refused(
            raw, {"tool_call_id": second.id, "by": "alice", "token": other_tool})
        no_run = sign_decision(DecisionClaims(sub="alice", prompt=handle.id, call=second.id, decision="approve",
                                              exp=int(time.time()) + 120), stack.private_pem)  # an old-style token
        assert "another run" in await _refused(raw, {"tool_call_id": second.id, "by": "alice", "token": no_run})
        fresh = _token(stack, handle.id, run_id, second.id, second.input, secrets.token_urlsafe(12))
        await raw.execute_update(names.APPROVE_CALL_UPDATE, {"tool_call_id": second.id, "by": "alice", "token": fresh})
        done = await handle.result()
        assert [o.decision.by for o in done.output if isinstance(o, ToolOutput)] == ["alice", "alice"]  # type: ignore[union-attr]


async def _parent_pending(handle: Any, count: int) -> list[Any]:
    for _ in range(300):
        pending = await handle.pending_approvals()
        if len(pending) == count:
            return pending  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {count} pending calls")


async def test_a_sub_agent_call_stays_listed_and_spoofed_reports_are_refused(dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env) as stack:
        handle = await stack.agent.start("delegate pay acme 33", user_id="olga")
        [pending] = await _parent_pending(handle, 1)
        raw = stack.agent.client.get_workflow_handle(handle.id)
        reason = await _refused(raw, {"tool_call_id": pending.tool_call_id, "by": "alice"})  # no token
        assert "token is required" in reason, reason
        await raw.signal(names.APPROVE_SIGNAL, {"tool_call_id": pending.tool_call_id, "by": "alice"})
        sub_call, child_call = pending.tool_call_id.split("/")
        fake = {"prompt_id": pending.path[-1], "user_id": "olga", "tool_call_id": child_call, "tool": "pay.send",
                "input": {"to": "mallory", "amount": 1},
                "reason": "FAKE approval injected by raw signal", "requested_at": "2026-01-01T00:00:00Z"}
        await raw.signal(names.CHILD_APPROVALS_SIGNAL, {"tool_call_id": sub_call, "child_workflow_id": pending.path[-1],
                                                       "pending": [fake]})
        await raw.signal(names.CHILD_APPROVALS_SIGNAL, {"tool_call_id": sub_call, "child_workflow_id": pending.path[-1],
                                                       "child_run_id": "guessed", "nonce": "guessed", "pending": []})
        record = await handle.get()
        refused = [a.detail for a in record.audit if a.kind == "ignored_child_approvals"]
        assert len(refused) == 2 and all("does not come from the sub-agent" in d for d in refused), record.audit
        still = await handle.pending_approvals()
        assert [(p.tool_call_id, p.reason) for p in still] == [(pending.tool_call_id, pending.reason)]
        async with stack.http("alice") as alice:  # the real decision, through the API, still works
            call = pending.tool_call_id.replace("/", "%2F")
            ok = await alice.post(f"/prompts/{handle.id}/approvals/{call}/approve")
            assert ok.status_code == 200, ok.text
        done = await asyncio.wait_for(handle.result(), 60)
        assert done.state == "completed" and ("acme", 33.0) in [(to, a) for to, a, _ in LEDGER]
        assert not [e for e in LEDGER if e[0] == "mallory"]


async def test_idempotency_keys_differ_between_runs_that_reuse_a_workflow_id(dev_env: WorkflowEnvironment) -> None:
    async with policy_stack(dev_env, signed=False) as stack:
        prompt_id = f"reuse-{secrets.token_hex(4)}"
        keys = []
        for _ in range(2):
            done = await (await stack.agent.start("pay shop 5", user_id="olga", prompt_id=prompt_id,
                                                  id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE)).result()
            run_id = (await stack.agent.client.get_workflow_handle(prompt_id).describe()).run_id
            assert done.state == "completed"
            [key] = [k for to, _, k in LEDGER if k.startswith(f"{prompt_id}/{run_id}/")]
            keys.append(key)
        assert keys[0] != keys[1] and all(k.endswith("/call_r1_0") for k in keys), keys


async def test_a_sub_agent_refusal_fails_the_parents_update_and_keeps_the_call_listed(
        dev_env: WorkflowEnvironment) -> None:
    """The correction check runs in the sub-agent; its refusal reaches the caller of the parent (HTTP 403),
    instead of an "approved" answer for a call that never runs."""
    async with policy_stack(dev_env) as stack:
        handle = await stack.agent.start("delegate pay acme 44", user_id="olga")
        [pending] = await _parent_pending(handle, 1)
        url = f"/prompts/{handle.id}/approvals/{pending.tool_call_id.replace('/', '%2F')}/approve"
        async with stack.http("alice") as alice:
            refused = await alice.post(url, json={"input": {"amount": 999999, "to": "mallory-offshore"}})
            assert refused.status_code == 403 and "user:cfo" in refused.json()["detail"], refused.text
            assert [p.tool_call_id for p in await handle.pending_approvals()] == [pending.tool_call_id]
            ok = await alice.post(url, json={"input": {"amount": 45}})
            assert ok.status_code == 200, ok.text
        done = await asyncio.wait_for(handle.result(), 60)
        assert done.state == "completed" and ("acme", 45.0) in [(to, a) for to, a, _ in LEDGER]
        assert not [e for e in LEDGER if e[0] == "mallory-offshore"]


async def _nonce(client: Any, child_id: str) -> str:
    """The report nonce a history reader (no codec) copies from the sub-agent's start event."""
    history = await client.get_workflow_handle(child_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    return str(json.loads(started.input.payloads[0].data)["parent"]["report_nonce"])


async def test_a_report_forged_with_the_nonce_can_neither_relabel_hide_nor_invent_a_call(
        dev_env: WorkflowEnvironment) -> None:
    """Review 1.13: with the nonce copied from history, a forged `child_approvals` used to show the approver
    another tool and reason for the real arguments (then the real call ran), empty the prompt's list, or add
    rows. The API shows and signs a sub-agent's call from the sub-agent's own prompt, and the token names the
    tool, so what the approver approves is what runs."""
    async with policy_stack(dev_env) as stack:
        handle = await stack.agent.start("delegate pay acme 33", user_id="olga")
        [real] = await _parent_pending(handle, 1)
        sub_call, child_call = real.tool_call_id.split("/")
        child_id = real.path[-1]
        raw = stack.agent.client.get_workflow_handle(handle.id)
        child_run = (await stack.agent.client.get_workflow_handle(child_id).describe()).run_id
        report = {"tool_call_id": sub_call, "child_workflow_id": child_id, "child_run_id": child_run,
                  "nonce": await _nonce(stack.agent.client, child_id)}
        relabelled = {**real.model_dump(mode="json", exclude={"path"}), "tool_call_id": child_call,
                      "tool": "weather.get", "reason": "Harmless: look up the weather"}
        invented = {**relabelled, "tool_call_id": "call_invented"}

        async def shown(user: str, path: str) -> list[dict[str, Any]]:
            async with stack.http(user) as http:
                response = await http.get(path)
            assert response.status_code == 200, response.text
            return [item for item in response.json() if item["prompt_id"] in (handle.id, child_id)]

        for forged in ([relabelled, invented], []):  # relabel and invent; then hide
            await raw.signal(names.CHILD_APPROVALS_SIGNAL, {**report, "pending": forged})
            wanted = [("weather.get", real.tool_call_id), ("weather.get", f"{sub_call}/call_invented")][:len(forged)]
            for _ in range(100):  # the forged report reached the parent's own list
                if [(p.tool, p.tool_call_id) for p in await handle.pending_approvals()] == wanted:
                    break
                await asyncio.sleep(0.05)
            assert [(p.tool, p.tool_call_id) for p in await handle.pending_approvals()] == wanted
            on_prompt = await shown("root", f"/prompts/{handle.id}/approvals")
            assert [(i["tool_call_id"], i["tool"], i["reason"]) for i in on_prompt] == \
                [(real.tool_call_id, "pay.send", real.reason)], on_prompt
            # The inbox: once, as pay.send (addressed from the top prompt, or from the sub-agent when hidden).
            inbox = await shown("alice", "/approvals")
            assert [(i["tool_call_id"].rsplit("/", 1)[-1], i["tool"], i["reason"]) for i in inbox] == \
                [(child_call, "pay.send", real.reason)], inbox
        async with stack.http("alice") as alice:
            call = real.tool_call_id.replace("/", "%2F")
            approved = await alice.post(f"/prompts/{handle.id}/approvals/{call}/approve")
            assert approved.status_code == 200, approved.text
            assert approved.json()["tool"] == "pay.send"
        done = await asyncio.wait_for(handle.result(), 60)
        child = await stack.agent.prompt(child_id).get()
    assert done.state == "completed"
    [paid] = [o for o in child.output if isinstance(o, ToolOutput) and o.tool == "pay.send"]
    assert paid.decision is not None and paid.decision.by == "alice"
    tokens = await _captured_tokens(stack.agent.client, child_id, child_run)
    claims = json.loads(_jws_payload(tokens[-1]["token"]))
    assert claims["tool"] == "pay.send" and claims["call"] == child_call and claims["prompt"] == child_id


def _jws_payload(token: str) -> str:
    import base64

    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
