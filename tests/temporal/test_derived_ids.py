"""Ids the system derives can't be taken, a principal is exactly one person, and every error is a 4xx problem
(issue 41, review security-turn4 §2.4, 2.7, 2.10, 2.11, 2.15, 3.1-3.5, 1.16). Real HTTP with API keys against a
running uvicorn app, a real worker and dev server; the raw Temporal SDK as an attacker with Temporal access."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.ids import IdTaken, caller_id_problem, reserved
from durable_agent.agent.period_budgets import (
    ConfigureRequest,
    Grant,
    LedgerView,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    ledger_id,
)
from durable_agent.api.config import ApiKey
from durable_agent.client.budgets import show_budget
from durable_agent.workflows.budget.access import ledger_update
from durable_agent.workflows.names import (
    CONFIGURE_BUDGET_UPDATE,
    CONVERSATION_WORKFLOW,
    RESERVE_BUDGET_UPDATE,
    SETTLE_BUDGET_UPDATE,
)
from durable_agent.workflows.protocol import ConversationRequest
from tests.support.api import ApiStack, api_stack

PROBLEM = "application/problem+json"
EVE = ("auth0|eve", "eve-auth0-key-0123456789abcdef")
EXTRA_KEYS = [ApiKey(principal=EVE[0], key=EVE[1])]


def _problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    assert body["type"] == f"/problems/{slug}", body
    return body


def _eve(stack: ApiStack) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=stack.url, headers={"Authorization": f"Bearer {EVE[1]}"}, timeout=60)


async def _squat(stack: ApiStack, workflow_id: str, user: str = "mallory") -> None:
    """What an attacker with raw Temporal access does: start some other workflow at a derived id."""
    await stack.agent.client.start_workflow(
        CONVERSATION_WORKFLOW, ConversationRequest(conversation_id=workflow_id, user_id=user),
        id=workflow_id, task_queue=stack.agent.settings.task_queue)


RESERVED = ["dagent-budget-user:bob", "dagent-budget-conversation:c1", "temporal-sys-scheduler:nightly-report",
            "temporal-sys-worker-deployment-version:agents:v2", "temporal-sys-worker-deployment:agents2",
            "DAGENT-budget-user:bob", "Temporal-Sys-x", "dagent-run-fin-sq-2026-11-28T01:40:00Z"]


async def test_no_caller_chooses_an_id_in_a_reserved_namespace(dev_env: WorkflowEnvironment) -> None:
    """§2.4, 2.11, 2.15: conversation ids and AG-UI thread ids in `dagent-` / `temporal-sys` are refused (422),
    through every door; the client refuses them too."""
    async with api_stack(dev_env) as stack, stack.http("mallory") as http:
        for taken in RESERVED:
            detail = _problem(await http.post("/conversations", json={"conversation_id": taken}), 422,
                              "invalid-request")["detail"]
            assert "reserved prefix" in detail, detail
            agui = await http.post("/agui", json={"threadId": taken, "runId": "r1", "state": None, "tools": [],
                                                  "context": [], "forwardedProps": {}, "messages": [
                                                      {"id": "m1", "role": "user", "content": "hello"}]})
            assert "reserved prefix" in _problem(agui, 422, "invalid-request")["detail"]
        for taken in RESERVED[:3]:
            with pytest.raises(ValueError, match="reserved prefix"):
                await stack.agent.start_conversation(user_id="mallory", conversation_id=taken)
            with pytest.raises(ValueError, match="reserved prefix"):
                await stack.agent.start("hi", user_id="mallory", prompt_id=taken)
        # Nothing was started at any of them.
        found = [w.id async for w in stack.agent.client.list_workflows(
            " OR ".join(f"WorkflowId = '{taken}'" for taken in RESERVED))]
        assert found == [], found


async def test_a_squatted_ledger_is_id_taken_never_no_budget(dev_env: WorkflowEnvironment) -> None:
    """§2.4 through the raw SDK: a workflow of another type at `dagent-budget-user:<id>`. The admin's PUT and GET
    answer 409 `id-taken` (no worker internals, no 500); the victim's prompts are refused rather than run with no
    budget; a raw reserve through the ledger's door is `IdTaken`."""
    async with api_stack(dev_env) as stack:
        await _squat(stack, ledger_id("user:alice"))
        try:
            async with stack.http("root") as root:
                put = _problem(await root.put("/budgets/user:alice", json={"max_tokens": 50}), 409, "id-taken")
                assert "RuntimeError" not in put["detail"] and "handler" not in put["detail"], put
                assert ledger_id("user:alice") in put["detail"], put
                _problem(await root.get("/budgets/user:alice"), 409, "id-taken")
            async with stack.http("alice") as alice:
                _problem(await alice.post("/prompts", json={"input": "hello"}), 409, "id-taken")
                _problem(await alice.post("/conversations", json={}), 409, "id-taken")
            with pytest.raises(IdTaken):
                await ledger_update(stack.agent.client, stack.agent.settings.task_queue, "user:alice",
                                    RESERVE_BUDGET_UPDATE, ReserveRequest(reservation_id="r1"), ReserveResult)
            with pytest.raises(IdTaken):
                await show_budget(stack.agent, "user:alice")
        finally:
            await stack.agent.client.get_workflow_handle(ledger_id("user:alice")).terminate("test over")
        async with stack.http("alice") as alice:  # the squatter gone, everything works again
            assert (await alice.post("/prompts", json={"input": "hello"})).status_code == 201


async def test_an_idp_subject_of_any_form_can_be_budgeted(dev_env: WorkflowEnvironment) -> None:
    """§2.7: `auth0|eve` is one person: an admin sets her budget, her prompts are under it and stop at it."""
    async with api_stack(dev_env, extra_api_keys=EXTRA_KEYS) as stack:
        principal = f"user:{EVE[0]}"
        async with stack.http("root") as root:
            put = await root.put(f"/budgets/{quote(principal, safe=':')}", json={"max_tokens": 1})
            assert put.status_code == 200, put.text
            assert put.json()["standing"]["principal"] == principal
            listed = (await root.get("/budgets")).json()
            assert {"principal": principal, "limit": put.json()["standing"]["limit"]} in listed, listed
        assert ledger_id(principal) != ledger_id("user:auth0") and ledger_id(principal).startswith("dagent-budget-")
        async with _eve(stack) as eve:
            started = await eve.post("/prompts", json={"input": "pay bob 50"})
            assert started.status_code == 201, started.text
            prompt = await stack.agent.prompt(started.json()["id"]).result()
            assert [s.principal for s in prompt.budgets] == [principal], prompt.budgets
            assert prompt.budget_stop is not None and principal in prompt.budget_stop, prompt.budget_stop
            mine = await eve.get(f"/budgets/{quote(principal, safe=':')}")
            assert mine.status_code == 200 and mine.json()["standing"]["spent_tokens"] > 1, mine.text


async def test_budget_numbers_are_bounded_through_every_door(dev_env: WorkflowEnvironment) -> None:
    """§3.1, 3.5: non-finite or huge numbers are refused by the API (422) and by the ledger itself when sent by
    raw update; the ledger stays readable."""
    async with api_stack(dev_env) as stack:
        async with stack.http("root") as root:
            for body in ('{"max_cost": 1e999}', '{"max_cost": NaN}', '{"max_tokens": 10000000000000000000000000000000}',
                         '{"max_cost": Infinity}'):
                bad = await root.put("/budgets/user:fin2", content=body, headers={"content-type": "application/json"})
                _problem(bad, 422, "invalid-request")
            _problem(await root.put("/budgets/user:alice%0A", json={"max_tokens": 5}), 422, "invalid-request")
            ok = await root.put("/budgets/user:fin2", json={"max_tokens": 100})
            assert ok.status_code == 200, ok.text
        client, queue = stack.agent.client, stack.agent.settings.task_queue
        handle = client.get_workflow_handle(ledger_id("user:fin2"))
        raw = [(RESERVE_BUDGET_UPDATE, {"reservation_id": "r1", "grant": {"id": "g", "unit": "cost",
                                                                           "amount": float("inf")}}),
               (RESERVE_BUDGET_UPDATE, {"reservation_id": "r2", "grant": {"id": "g", "unit": "tokens",
                                                                           "amount": 1e30}}),
               (SETTLE_BUDGET_UPDATE, {"reservation_id": "r3", "cost": float("inf")}),
               (SETTLE_BUDGET_UPDATE, {"reservation_id": "r4", "tokens": 10**30}),
               (CONFIGURE_BUDGET_UPDATE, {"principal": "user:fin2", "limit": {"max_cost": float("inf")}})]
        for update, payload in raw:  # a dict, not the model: the attacker sends what the model would refuse
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update(update, payload)
        view = await handle.query("budget_state", result_type=LedgerView)
        assert view.standing.spent_cost == 0 and view.standing.extra_tokens == 0 and view.standing.extra_cost == 0
        async with stack.http("root") as root:
            assert (await root.get("/budgets/user:fin2")).status_code == 200
        answer = await ledger_update(client, queue, "user:fin2", RESERVE_BUDGET_UPDATE,
                                     ReserveRequest(reservation_id="r5", grant=Grant(id="g2", unit="tokens",
                                                                                      amount=5)), ReserveResult)
        assert answer.refused is None and answer.standing.extra_tokens == 5
        await ledger_update(client, queue, "user:fin2", SETTLE_BUDGET_UPDATE, SettleRequest(reservation_id="r5"),
                            type(answer.standing))
        await ledger_update(client, queue, "user:fin2", CONFIGURE_BUDGET_UPDATE,
                            ConfigureRequest(principal="user:fin2"), LedgerView)


async def test_bad_input_is_a_4xx_problem(dev_env: WorkflowEnvironment) -> None:
    """§1.16, 3.2, 3.3: a 5,000-digit Last-Event-ID, overflowing schedule durations, a thread id with a trailing
    newline, an empty AG-UI prompt id: 422, never a 500."""
    async with api_stack(dev_env) as stack, stack.http("alice") as http:
        started = await http.post("/prompts", json={"input": "hello"})
        prompt_id = started.json()["id"]
        await stack.agent.prompt(prompt_id).result()
        events = await http.get(f"/prompts/{prompt_id}/events", headers={"Last-Event-ID": "7" * 5000})
        _problem(events, 422, "invalid-request")
        for spec in ({"every": "1h", "jitter": "99999999999d"}, {"every": "999999999999999d"},
                     {"every": "1h", "offset": "2h"}):
            created = await http.post("/schedules", json={"id": "overflow", "input": "x", **spec})
            _problem(created, 422, "invalid-request")
        run = {"runId": "r1", "state": None, "tools": [], "context": [], "forwardedProps": {},
               "messages": [{"id": "m1", "role": "user", "content": "hello"}]}
        _problem(await http.post("/agui", json={**run, "threadId": "abc\n"}), 422, "invalid-request")
        resume = {**run, "threadId": "thread-x", "forwardedProps": {"prompt_id": ""},
                  "resume": [{"interruptId": "call_r1_0", "status": "resolved", "payload": {"approved": True}}]}
        _problem(await http.post("/agui", json=resume), 422, "invalid-request")


async def test_a_schedule_run_id_cannot_be_taken(dev_env: WorkflowEnvironment) -> None:
    """§2.10: mallory creates conversations under the ids of an admin's next runs (in the old `<schedule>-<time>`
    form, and the new one, refused); every run happens."""
    async with api_stack(dev_env) as stack:
        async with stack.http("root") as root:
            created = await root.post("/schedules", json={"id": "root-sq", "input": "scheduled job", "every": "3s"})
            assert created.status_code == 201, created.text
        try:
            due = [datetime.fromisoformat(t) for t in created.json()["next_runs"][:2]]
            stamps = [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in due]
            async with stack.http("mallory") as http:
                for stamp in stamps:
                    old_form = await http.post("/conversations", json={"conversation_id": f"root-sq-{stamp}"})
                    assert old_form.status_code == 201, old_form.text  # a caller's id: harmless now
                    new_form = await http.post("/conversations",
                                               json={"conversation_id": f"dagent-run-root-sq-{stamp}"})
                    _problem(new_form, 422, "invalid-request")
            for stamp in stamps:
                run_id = f"dagent-run-root-sq-{stamp}"
                for _ in range(200):
                    found = [w async for w in stack.agent.client.list_workflows(f"WorkflowId = '{run_id}'")]
                    if found:
                        break
                    await asyncio.sleep(0.1)
                assert found and found[0].workflow_type == "PromptWorkflow", (run_id, found)
        finally:
            await stack.agent.client.get_schedule_handle("root-sq").delete()


async def test_schedules_have_a_quota_and_a_shortest_interval_for_non_admins(dev_env: WorkflowEnvironment) -> None:
    """§2.12: a role-less user may not schedule every second, nor more than `schedules_per_user`; `GET
    /schedules` lists (and describes) only the caller's."""
    async with api_stack(dev_env, schedules_per_user=2) as stack:
        names = []
        try:
            async with stack.http("mallory") as http:
                fast = await http.post("/schedules", json={"id": "m-fast", "input": "x", "every": "1s",
                                                           "overlap": "allow_all"})
                assert "at least 1m" in _problem(fast, 422, "invalid-request")["detail"]
                for n in range(2):
                    names.append(f"m-{n}")
                    ok = await http.post("/schedules", json={"id": f"m-{n}", "input": "x", "every": "1h",
                                                             "paused": True})
                    assert ok.status_code == 201, ok.text
                third = await http.post("/schedules", json={"id": "m-3", "input": "x", "every": "1h"})
                assert "delete one first" in _problem(third, 422, "invalid-request")["detail"]
                reserved = await http.post("/schedules", json={"id": "temporal-sys-x", "input": "x", "every": "1h"})
                _problem(reserved, 422, "invalid-request")
            async with stack.http("alice") as http:
                assert (await http.get("/schedules")).json() == []
            async with stack.http("root") as root:
                names.append("root-fast")
                assert (await root.post("/schedules", json={"id": "root-fast", "input": "x", "every": "1s",
                                                            "paused": True})).status_code == 201
        finally:
            for name in names:
                await stack.agent.client.get_schedule_handle(name).delete()


async def test_a_closed_prompt_id_is_not_reused_by_default(dev_env: WorkflowEnvironment) -> None:
    """§1.6: `AgentClient.start` refuses a closed prompt's id unless the caller asks for reuse."""
    async with api_stack(dev_env) as stack:
        first = await stack.agent.start("hello", user_id="alice", prompt_id="reuse-me-1")
        await first.result()
        with pytest.raises(WorkflowAlreadyStartedError):
            await stack.agent.start("pay 900 to mallory", user_id="alice", prompt_id="reuse-me-1")
        record = await stack.agent.prompt("reuse-me-1").get()
        assert record.input == "hello"


def _http_ids() -> st.SearchStrategy[str]:
    prefixes = st.sampled_from(["dagent-budget-user:", "DAGENT-run-", "temporal-sys-scheduler:", "Temporal-Sys-",
                                "user:", "role:", "auth0|", "conv-", ""])
    body = st.text(alphabet="abcXYZ019._:@-|", min_size=1, max_size=30)
    return st.builds(lambda p, b, s: p + b + s, prefixes, body, st.sampled_from(["", "\n", " "]))


async def test_generated_ids_never_reach_a_derived_workflow_over_http(dev_env: WorkflowEnvironment) -> None:
    """Hypothesis through real HTTP: generated conversation ids and AG-UI thread ids are either refused (422) or
    start a conversation at exactly that id, which is never in a reserved namespace."""
    async with api_stack(dev_env) as stack:
        url, seen = stack.url, []

        @given(_http_ids(), st.booleans())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        def one(value: str, agui: bool) -> None:
            headers = {"Authorization": "Bearer mallory-key-0123456789abcdef"}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
                if agui:
                    response = http.post("/agui", json={"threadId": value, "runId": "r", "state": None, "tools": [],
                                                        "context": [], "forwardedProps": {},
                                                        "messages": [{"id": "m", "role": "user", "content": "hi"}]})
                else:
                    response = http.post("/conversations", json={"conversation_id": value})
            seen.append(value)
            if caller_id_problem(value) is not None:
                assert response.status_code == 422, (value, response.text)
                return
            assert response.status_code in (200, 201, 403), (value, response.text)  # 403: mallory's id taken by her
            assert not reserved(value)

        await asyncio.to_thread(one)
        assert seen
        ids = [w.id async for w in stack.agent.client.list_workflows(
            f"TaskQueue = '{stack.agent.settings.task_queue}'")]
        assert not any(reserved(i) and not i.startswith("dagent-budget-") for i in ids), ids


async def test_a_scheduled_style_prompt_under_a_squatted_ledger_stops_at_once_with_id_taken(
        dev_env: WorkflowEnvironment) -> None:
    """§2.4: a run that names its user's ledger (as every scheduled run does) while another workflow holds the
    ledger's id stops before any model call, at once, saying `id-taken` (it was 10 failed reserves, then "the
    budget ledger could not be reached")."""
    async with api_stack(dev_env) as stack:
        principal = f"user:sq-{uuid.uuid4().hex[:8]}"
        await _squat(stack, ledger_id(principal))
        try:
            handle = await stack.agent.start("hello", user_id=principal.removeprefix("user:"), budgets=[principal])
            prompt = await asyncio.wait_for(handle.result(), 30)
        finally:
            await stack.agent.client.get_workflow_handle(ledger_id(principal)).terminate("test over")
    assert prompt.budget_stop is not None and "id-taken" in prompt.budget_stop, prompt.budget_stop
    assert ledger_id(principal) in prompt.budget_stop and prompt.usage.model_calls == 0


async def test_removing_a_budget_never_set_starts_no_ledger(dev_env: WorkflowEnvironment) -> None:
    """§3.1: `DELETE /budgets/<unknown>` used to start a ledger that runs for ever."""
    async with api_stack(dev_env) as stack, stack.http("root") as root:
        principal = f"user:never-{uuid.uuid4().hex[:8]}"
        assert (await root.delete(f"/budgets/{principal}")).status_code == 204
        found = [w async for w in stack.agent.client.list_workflows(f"WorkflowId = '{ledger_id(principal)}'")]
        assert found == []
        _problem(await root.get(f"/budgets/{principal}"), 404, "not-found")
