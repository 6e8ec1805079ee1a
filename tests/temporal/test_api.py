"""The HTTP API against a real dev server and worker, over a running uvicorn app (httpx)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent.api import create_app
from durable_agent.api.server import serve_in_background
from durable_agent.client import DecisionRefused
from tests.support.api import ApiStack, api_config, api_stack

PROBLEM = "application/problem+json"


async def _start(stack: ApiStack, user: str, text: str) -> str:
    async with stack.http(user) as http:
        response = await http.post("/prompts", json={"input": text})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _wait_state(stack: ApiStack, prompt_id: str, *states: str) -> dict[str, Any]:
    prompt = await stack.agent.prompt(prompt_id).wait_until(*states)
    assert prompt.state in states, prompt.state
    return prompt.model_dump(mode="json")


def _problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    assert body["type"] == f"/problems/{slug}" and body["status"] == status, body
    return body


async def test_start_read_and_list_prompts_as_the_authenticated_user(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "hello there")
        await _wait_state(stack, prompt_id, "completed")
        async with stack.http("alice") as http:
            record = (await http.get(f"/prompts/{prompt_id}")).json()
            assert record["prompt"]["user_id"] == "alice"
            assert record["prompt"]["output"][-1]["text"] == "You said: hello there"
            assert record["links"]["temporal_ui"].endswith(f"/workflows/{prompt_id}")
            listed = None
            for _ in range(100):  # visibility is eventually consistent
                listed = (await http.get("/prompts", params={"state": "completed"})).json()
                if any(p["prompt_id"] == prompt_id for p in listed):
                    break
                await asyncio.sleep(0.1)
            assert listed is not None and any(p["prompt_id"] == prompt_id and p["user_id"] == "alice" for p in listed)
            assert all(p["user_id"] == "alice" for p in listed)
            _problem(await http.get("/prompts", params={"user": "mallory"}), 403, "not-allowed")
        async with stack.http("mallory") as http:
            _problem(await http.get(f"/prompts/{prompt_id}"), 403, "not-allowed")
            mine = (await http.get("/prompts")).json()
            assert all(p["prompt_id"] != prompt_id for p in mine)


async def test_approve_with_corrected_arguments_records_the_principal(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "pay bob 250")
        waiting = await _wait_state(stack, prompt_id, "waiting_for_approval")
        call_id = waiting["output"][1]["id"]
        async with stack.http("ann") as http:
            pending = (await http.get("/approvals")).json()
            item = next(p for p in pending if p["prompt_id"] == prompt_id)
            assert item["tool"] == "payment.send" and item["input"] == {"to": "bob", "amount": 250}
            assert item["user_id"] == "alice" and item["can_decide"] is True
            assert item["input_schema"]["properties"]["amount"]["type"] == "number"
            bad = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve",
                                  json={"input": {"to": "bob", "amount": "lots"}})
            body = _problem(bad, 422, "invalid-arguments")
            assert "amount" in body["detail"] and "number" in body["detail"]
            assert (await stack.agent.prompt(prompt_id).get()).state == "waiting_for_approval"
            ok = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve",
                                 json={"input": {"to": "bob", "amount": 120}})
            assert ok.status_code == 200, ok.text
            resolved = ok.json()
            assert resolved["result"] == {"type": "success", "output": {"sent": 120.0, "to": "bob"}}
            assert resolved["decision"]["by"] == "ann"
            assert resolved["decision"]["original_input"] == {"to": "bob", "amount": 250}
        async with stack.http("mallory") as http:
            assert all(p["prompt_id"] != prompt_id for p in (await http.get("/approvals")).json())
        await _wait_state(stack, prompt_id, "completed")


async def test_approvals_list_shows_a_prompt_whose_worker_is_down(dev_env: WorkflowEnvironment) -> None:
    """A waiting prompt whose worker is gone cannot answer a query, but the list needs none: its waiting calls
    are in its memo, listed from visibility (a prompt without a memo is asked for at most
    `pending_query_seconds`: tests/temporal/test_pending_list.py)."""
    async with api_stack(dev_env) as orphaned_stack:
        orphan = await _start(orphaned_stack, "alice", "pay bob 250")
        await _wait_state(orphaned_stack, orphan, "waiting_for_approval")
    # The same deployment's API, its queue now without any worker.
    app = create_app(orphaned_stack.agent, api_config(orphaned_stack.private_pem, pending_query_seconds=1.0))
    async with serve_in_background(app) as url:
        api = ApiStack(url=url, agent=orphaned_stack.agent, private_pem=orphaned_stack.private_pem,
                       public_pem=orphaned_stack.public_pem)
        # A guard, not a measurement: asking the orphan without a bound holds a query for ~30 s.
        async with api.http("root", timeout=20) as http:
            listed = {p["prompt_id"] for p in (await http.get("/approvals")).json()}
    assert orphan in listed


async def test_reject_with_reason_and_decisions_on_finished_calls(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "pay bob 300")
        call_id = (await _wait_state(stack, prompt_id, "waiting_for_approval"))["output"][1]["id"]
        async with stack.http("alice") as http:
            rejected = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/reject", json={"reason": "too much"})
            assert rejected.status_code == 200, rejected.text
            assert rejected.json()["decision"] == {**rejected.json()["decision"], "decision": "rejected",
                                                   "by": "alice", "reason": "too much"}
            again = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")
            _problem(again, 409, "already-decided")
            _problem(await http.post(f"/prompts/{prompt_id}/approvals/call-nope/approve"), 404, "unknown-tool-call")
            _problem(await http.post("/prompts/prompt-nope/approvals/x/approve"), 404, "unknown-prompt")
            await _wait_state(stack, prompt_id, "completed")
            _problem(await http.post(f"/prompts/{prompt_id}/cancel"), 409, "prompt-finished")


async def test_double_approval_from_two_clients_exactly_one_wins(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "pay carol 500")
        call_id = (await _wait_state(stack, prompt_id, "waiting_for_approval"))["output"][1]["id"]
        async with stack.http("alice") as first, stack.http("ann") as second:
            url = f"/prompts/{prompt_id}/approvals/{call_id}/approve"
            responses = await asyncio.gather(first.post(url), second.post(url))
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 409], [r.text for r in responses]
        loser = next(r for r in responses if r.status_code == 409)
        assert "already decided" in _problem(loser, 409, "already-decided")["detail"]
        winner = next(r for r in responses if r.status_code == 200).json()
        prompt = await stack.agent.prompt(prompt_id).result()
        decided = prompt.tool_call(call_id)
        assert decided is not None and decided.decision is not None
        assert decided.decision.by == winner["decision"]["by"]


async def test_named_approvers_and_forged_raw_signals_are_refused(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "open vault b7")
        call_id = (await _wait_state(stack, prompt_id, "waiting_for_approval"))["output"][0]["id"]
        handle = stack.agent.prompt(prompt_id)
        async with stack.http("alice") as http:
            item = next(p for p in (await http.get("/approvals")).json() if p["prompt_id"] == prompt_id)
            assert item["can_decide"] is False and item["approvers"] == ["role:finance"]
            _problem(await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve"), 403, "not-allowed")
        async with stack.http("ann") as http:  # an approver, but not in finance
            _problem(await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve"), 403, "not-allowed")
        # Raw Temporal calls that claim to be fiona: no token, or a token signed by another key.
        try:
            await handle.approve(call_id, by="fiona", wait=True)
            raise AssertionError("an unsigned update was accepted")
        except DecisionRefused as exc:
            assert "token is required" in str(exc)
        from durable_agent.workflows.decision_tokens import DecisionClaims, sign_decision
        from tests.support.api import key_pair

        forged = sign_decision(DecisionClaims(sub="fiona", roles=["finance"], prompt=prompt_id, call=call_id,
                                              decision="approve", exp=2_000_000_000), key_pair()[0])
        await handle.approve(call_id, by="fiona", token=forged)  # a raw signal, forged
        await handle.approve(call_id, by="fiona")  # a raw signal, unsigned
        async with stack.http("root") as http:  # forces a round trip through the workflow after the signals
            record = (await http.get(f"/prompts/{prompt_id}")).json()["prompt"]
        assert record["state"] == "waiting_for_approval"
        refused = [a["detail"] for a in record["audit"] if a["kind"] == "ignored_approve"]
        assert any("not valid" in d for d in refused) and any("token is required" in d for d in refused), refused
        async with stack.http("fiona") as http:
            ok = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")
            assert ok.status_code == 200, ok.text
            assert ok.json()["decision"]["by"] == "fiona"
            assert ok.json()["result"]["output"] == "opened b7"


async def test_bad_input_is_refused_before_temporal(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env, max_body_bytes=4096) as stack, stack.http("alice") as http:
        big = await http.post("/prompts", content=b'{"input": "' + b"x" * 10_000 + b'"}',
                              headers={"content-type": "application/json"})
        _problem(big, 413, "payload-too-large")

        async def chunks() -> Any:
            for _ in range(10):
                yield b"x" * 1000

        streamed = await http.post("/prompts", content=chunks(), headers={"content-type": "application/json"})
        _problem(streamed, 413, "payload-too-large")
        shape = await http.post("/prompts", json={"input": ["not", "a", "string"], "extra": 1})
        body = _problem(shape, 422, "invalid-request")
        assert {tuple(e["loc"]) for e in body["errors"]} >= {("body", "input"), ("body", "extra")}
        _problem(await http.post("/prompts", content=b"{not json", headers={"content-type": "application/json"}),
                 422, "invalid-request")
        _problem(await http.post("/prompts", json={"input": ""}), 422, "invalid-request")
        _problem(await http.get("/prompts/bad'id"), 422, "invalid-request")
        _problem(await http.get("/prompts/prompt-unknown"), 404, "unknown-prompt")
        _problem(await http.get("/conversations/conv-unknown"), 404, "unknown-conversation")
        _problem(await http.get("/prompts/prompt-unknown/events"), 404, "unknown-prompt")
        _problem(await http.post("/prompts/prompt-unknown/steer", json={"message": "hi"}), 404, "unknown-prompt")
        _problem(await http.post("/prompts/prompt-unknown/steer", json={"text": "hi"}), 422, "invalid-request")
        _problem(await http.get("/nowhere"), 404, "not-found")
        async with stack.http() as anonymous:
            _problem(await anonymous.get("/prompts"), 401, "unauthenticated")


def test_every_refusal_kind_is_a_problem_type() -> None:
    """The API answers a refused decision with the refusal's kind as its problem type, unchanged."""
    from durable_agent.agent.errors import REFUSAL_KINDS
    from durable_agent.api.problems import PROBLEM_TYPES

    assert REFUSAL_KINDS <= set(PROBLEM_TYPES)
