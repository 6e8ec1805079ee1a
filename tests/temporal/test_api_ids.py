"""Ids nobody else can take, and every error a problem: real HTTP against a running uvicorn app, a real worker
and dev server, and the raw Temporal SDK as the attacker's second channel (review security-turn3 §3.3, 3.4, 3.7)."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent.api.headers import API_CSP, PAGE_CSP
from durable_agent.workflows.names import PROMPT_WORKFLOW
from tests.support.api import USERS, ApiStack, api_stack

PROBLEM = "application/problem+json"


def _problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    assert body["type"] == f"/problems/{slug}" and body["status"] == status, body
    return body


async def _start(stack: ApiStack, user: str, text: str) -> str:
    async with stack.http(user) as http:
        response = await http.post("/prompts", json={"input": text})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_a_caller_cannot_choose_or_reuse_a_prompt_id(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        alice_prompt = await _start(stack, "alice", "hello there")
        await stack.agent.prompt(alice_prompt).wait_until("completed")
        async with stack.http("mallory") as http:
            taken = await http.post("/prompts", json={"input": "mine now", "prompt_id": alice_prompt})
            assert "assigns prompt ids" in _problem(taken, 422, "invalid-request")["detail"]
            fresh = await http.post("/prompts", json={"input": "a fresh one", "prompt_id": "never-used-before-1"})
            _problem(fresh, 422, "invalid-request")
        async with stack.http("alice") as http:
            record = await http.get(f"/prompts/{alice_prompt}")
        assert record.status_code == 200, record.text
        assert record.json()["prompt"]["input"] == "hello there" and record.json()["prompt"]["user_id"] == "alice"
        # Server-assigned ids are random: nothing to guess ahead of time.
        ids = [await _start(stack, "mallory", f"hi {n}") for n in range(3)]
        assert len(set(ids)) == 3 and all(re.fullmatch(r"prompt-[0-9a-f]{16}", i) for i in ids), ids


async def test_a_taken_conversation_turn_id_neither_fails_the_conversation_nor_loses_the_message(
        dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        async with stack.http("alice") as alice:
            conversation = (await alice.post("/conversations", json={})).json()["conversation"]["id"]
            first = (await alice.post(f"/conversations/{conversation}/messages", json={"input": "pay bob 250"})).json()
            await stack.agent.prompt(first["id"]).wait_until("waiting_for_approval")
            # The conversation is busy: the next message waits in its queue under the id it will run as.
            queued = await alice.post(f"/conversations/{conversation}/messages", json={"input": "hello again"})
            assert queued.status_code == 201, queued.text
            queued_id = queued.json()["id"]
        # Not `<conversation>-0002` (which anyone could start first) but a random suffix nobody can guess.
        assert re.fullmatch(rf"{re.escape(conversation)}-0002-[0-9a-f]{{12}}", queued_id), queued_id
        # Even if the id leaks, an attacker with raw Temporal access who starts it first cannot hurt the turn.
        squat = await stack.agent.start("squatting", prompt_id=queued_id, user_id="mallory")
        await squat.wait_until("completed")
        async with stack.http("alice") as alice:
            call_id = (await stack.agent.prompt(first["id"]).get()).output[1].id
            approved = await alice.post(f"/prompts/{first['id']}/approvals/{call_id}/approve")
            assert approved.status_code == 200, approved.text
            handle = stack.agent.conversation(conversation)
            for _ in range(300):
                record = await handle.get()
                if len(record.prompt_ids) == 2 and record.running_prompt_id is None:
                    break
                await asyncio.sleep(0.1)
            assert len(record.prompt_ids) == 2, record
            second_id = record.prompt_ids[1]
            assert second_id != queued_id and second_id.startswith(f"{conversation}-0002-"), record.prompt_ids
            assert any(a.kind == "prompt_id_taken" and queued_id in a.detail for a in record.audit), record.audit
            second = (await alice.get(f"/prompts/{second_id}")).json()["prompt"]
            assert second["input"] == "hello again" and second["user_id"] == "alice"
            assert second["state"] == "completed" and second["output"][-1]["text"] == "You said: hello again"
            # The conversation still serves: a third message runs as usual.
            third = (await alice.post(f"/conversations/{conversation}/messages", json={"input": "still here"})).json()
            prompt = await (await handle.prompt_started(third["id"])).result()
            assert prompt.state == "completed" and prompt.conversation_id == conversation
        described = await dev_env.client.get_workflow_handle(conversation).describe()
        assert described.status is not None and described.status.name == "RUNNING"
        assert (await squat.get()).user_id == "mallory"  # the squatter's workflow is its own, untouched


async def test_ids_of_the_wrong_kind_are_problems_not_500s(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "hello there")
        await stack.agent.prompt(prompt_id).wait_until("completed")
        async with stack.http("alice") as http:
            conversation = (await http.post("/conversations", json={})).json()["conversation"]["id"]
            assert "is a conversation" in _problem(await http.get(f"/prompts/{conversation}"), 404,
                                                   "unknown-prompt")["detail"]
            _problem(await http.get(f"/prompts/{conversation}/events"), 404, "unknown-prompt")
            assert "is a prompt" in _problem(await http.get(f"/conversations/{prompt_id}"), 404,
                                             "unknown-conversation")["detail"]
            _problem(await http.post(f"/conversations/{prompt_id}/messages", json={"input": "x"}), 404,
                     "unknown-conversation")
            # An existing id (here a closed prompt) can't become a conversation, for anyone.
            _problem(await http.post("/conversations", json={"conversation_id": prompt_id}), 409, "id-taken")
            agui = await http.post("/agui", json={"threadId": prompt_id, "runId": "r1",
                                                  "messages": [{"id": "m1", "role": "user", "content": "hi"}]})
            _problem(agui, 409, "id-taken")
        async with stack.http("mallory") as http:
            _problem(await http.post("/conversations", json={"conversation_id": prompt_id}), 409, "id-taken")
        # The prompt is untouched: still alice's only run.
        runs = [e async for e in dev_env.client.list_workflows(f"WorkflowId = '{prompt_id}'")]
        assert len(runs) == 1 and runs[0].workflow_type == PROMPT_WORKFLOW


async def _raw_get(url: str, path: str, headers: bytes) -> tuple[int, dict[str, str], bytes]:
    """One GET with header bytes as given (httpx refuses non-ASCII header values); the status, headers, body."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


async def test_a_non_ascii_last_event_id_is_a_problem(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "hello there")
        auth = f"Authorization: Bearer {USERS['alice'][0]}\r\n".encode()
        for value in (b"\xb2", b"1\xd9\xa3", b"abc", b"-1"):
            status, headers, body = await _raw_get(stack.url, f"/prompts/{prompt_id}/events",
                                                   auth + b"Last-Event-ID: " + value + b"\r\n")
            assert status == 422 and headers["content-type"].startswith(PROBLEM), (value, status, body)
            assert b"/problems/invalid-request" in body and b"Last-Event-ID" in body
        async with stack.http("alice") as http, http.stream("GET", f"/prompts/{prompt_id}/events",
                                                              headers={"Last-Event-ID": "0"}) as response:
            assert response.status_code == 200  # a real id still resumes


async def test_pages_and_api_answers_carry_security_headers(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack, stack.http("alice") as http:
        for path in ("/", "/inbox", "/chat", "/static/app.js"):
            response = await http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-security-policy"] == PAGE_CSP, path
            assert response.headers["x-frame-options"] == "DENY", path
            assert response.headers["x-content-type-options"] == "nosniff", path
        for response in (await http.get("/me"), await http.get("/prompts/nope-404")):
            assert response.headers["content-security-policy"] == API_CSP
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
        assert "frame-ancestors 'none'" in PAGE_CSP and "script-src 'self'" in PAGE_CSP
        assert "unsafe-inline" not in PAGE_CSP


async def test_pages_work_in_chromium_under_the_csp_and_it_blocks_injected_scripts(
        dev_env: WorkflowEnvironment) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.pages import browser, wait_for

    async with api_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as driver:
                driver.get(f"{stack.url}/chat#key={USERS['alice'][0]}")
                # The page's own scripts ran (they fetched /me and started a conversation) under the CSP.
                wait_for(driver, lambda d: d.find_element(By.ID, "conversation").text.startswith("conversation "),
                         "a conversation")
                assert "alice" in driver.find_element(By.ID, "me").text
                injected = driver.execute_script(
                    "window.__violations = 0;"
                    "document.addEventListener('securitypolicyviolation', () => { window.__violations += 1; });"
                    "const s = document.createElement('script'); s.textContent = 'window.__injected = 1;';"
                    "document.body.appendChild(s); return window.__injected === undefined;")
                assert injected is True, "an injected inline script ran: the CSP is not enforced"
                wait_for(driver, lambda d: d.execute_script("return window.__violations") >= 1, "a CSP violation")

        await asyncio.to_thread(scenario)


async def test_an_unexpected_error_is_a_500_problem_without_internals(dev_env: WorkflowEnvironment) -> None:
    """The app's own handlers, over real HTTP: a route that fails unexpectedly (added to the real app for this
    test) answers a problem, and the exception's text (which could hold anything) stays in the log."""
    from durable_agent.api import create_app
    from durable_agent.api.server import serve_in_background
    from tests.support.api import api_config, key_pair

    async with api_stack(dev_env) as stack:
        app = create_app(stack.agent, api_config(key_pair()[0]))


        @app.get("/test-only/boom")
        async def boom() -> None:
            raise RuntimeError("secret-internal-detail 7f3a")

        async with serve_in_background(app) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.get("/test-only/boom")
    body = _problem(response, 500, "internal-error")
    assert "secret-internal-detail" not in response.text and body["instance"] == "/test-only/boom"
    assert response.headers["x-content-type-options"] == "nosniff"
