"""Identity and authorisation: OIDC JWTs against a JWKS served over real HTTP, and the matrix of every
endpoint x {no token, wrong user, approver, admin} against a real dev server, worker and uvicorn app."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from pytest_httpserver import HTTPServer
from temporalio.testing import WorkflowEnvironment

from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, OidcConfig
from durable_agent.api.server import serve_in_background
from tests.support.api import ApiStack, api_stack, auth, web_model
from tests.support.workers import agent_worker

ISSUER = "https://issuer.test/"
AUDIENCE = "durable-agent"


@pytest.fixture
def jwks_server() -> Iterator[tuple[HTTPServer, rsa.RSAPrivateKey]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    with HTTPServer(host="127.0.0.1", port=0) as server:
        server.expect_request("/jwks.json").respond_with_json({"keys": [jwk]})
        yield server, key


def _token(key: Any, *, sub: str = "olga", roles: list[str] | None = None, aud: str = AUDIENCE,
           exp_in: int = 300, kid: str = "k1") -> str:
    claims = {"sub": sub, "roles": roles or [], "iss": ISSUER, "aud": aud, "exp": int(time.time()) + exp_in}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


async def test_oidc_tokens_verified_against_a_jwks_url(dev_env: WorkflowEnvironment,
                                                       jwks_server: tuple[HTTPServer, Any]) -> None:
    server, key = jwks_server
    config = ApiConfig(oidc=OidcConfig(jwks_url=server.url_for("/jwks.json"), issuer=ISSUER, audience=AUDIENCE))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    async with agent_worker(dev_env, plugins=[], model=web_model()) as agent, \
            serve_in_background(create_app(agent, config)) as url:
        import httpx

        async with httpx.AsyncClient(base_url=url) as http:
            async def me(token: str) -> httpx.Response:
                return await http.get("/me", headers={"Authorization": f"Bearer {token}"})

            ok = await me(_token(key, sub="olga", roles=["approver"]))
            assert ok.status_code == 200, ok.text
            assert ok.json() == {"id": "olga", "roles": ["approver"], "is_approver": True, "is_admin": False}
            started = await http.post("/prompts", json={"input": "hi"},
                                      headers={"Authorization": f"Bearer {_token(key, sub='olga')}"})
            assert started.status_code == 201
            assert (await agent.prompt(started.json()["id"]).result()).user_id == "olga"
            for bad in (_token(key, exp_in=-60), _token(key, aud="someone-else"), _token(other),
                        _token(key)[:-4] + "AAAA", "not-a-token"):
                refused = await me(bad)
                assert refused.status_code == 401, bad
                assert refused.json()["type"] == "/problems/unauthenticated"
                assert refused.headers["www-authenticate"] == "Bearer"
    assert any(req.path == "/jwks.json" for req, _ in server.log)


CALLERS = ("none", "mallory", "ann", "root")  # no token, a user who does not own it, an approver, an admin


async def _waiting_prompt(stack: ApiStack) -> tuple[str, str]:
    async with stack.http("alice") as http:
        prompt_id = (await http.post("/prompts", json={"input": "pay bob 250"})).json()["id"]
    prompt = await stack.agent.prompt(prompt_id).wait_until("waiting_for_approval")
    return prompt_id, prompt.output[1].id  # type: ignore[union-attr]


async def test_authorisation_matrix(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        async with stack.http("alice") as http:
            conversation = (await http.post("/conversations", json={})).json()["conversation"]["id"]
        shared_id, shared_call = await _waiting_prompt(stack)
        # Each mutation gets its own waiting prompt per caller that may succeed.
        successes = [("approve", "ann"), ("approve", "root"), ("reject", "ann"), ("reject", "root"),
                     ("steer", "root"), ("cancel", "root")]
        fresh = dict(zip(successes, await asyncio.gather(*(_waiting_prompt(stack) for _ in successes)), strict=True))

        def target(what: str, who: str) -> tuple[str, str]:
            return fresh.get((what, who), (shared_id, shared_call))

        def endpoints(who: str) -> list[tuple[str, str, str, dict[str, Any] | None, int]]:
            """(name, method, path, body, expected status) for this caller."""
            approver, admin = who == "ann", who == "root"
            pid, cid = target("approve", who)
            rid, rcid = target("reject", who)
            sid, _ = target("steer", who)
            xid, _ = target("cancel", who)
            ok_if_sees = 200 if approver or admin else 403
            return [
                ("me", "GET", "/me", None, 200),
                ("list prompts", "GET", "/prompts", None, 200),
                ("list another user's prompts", "GET", "/prompts?user=alice", None, ok_if_sees),
                ("start prompt", "POST", "/prompts", {"input": "hello"}, 201),
                ("get prompt", "GET", f"/prompts/{shared_id}", None, ok_if_sees),
                ("events", "GET", f"/prompts/{shared_id}/events?from=0", None, ok_if_sees),
                ("pending approvals", "GET", "/approvals", None, 200),
                ("approve", "POST", f"/prompts/{pid}/approvals/{cid}/approve", {}, ok_if_sees),
                ("reject", "POST", f"/prompts/{rid}/approvals/{rcid}/reject", {"reason": "no"}, ok_if_sees),
                ("steer", "POST", f"/prompts/{sid}/steer", {"message": "stop"}, 202 if admin else 403),
                ("cancel", "POST", f"/prompts/{xid}/cancel", None, 202 if admin else 403),
                ("get conversation", "GET", f"/conversations/{conversation}", None, ok_if_sees),
                ("send to conversation", "POST", f"/conversations/{conversation}/messages", {"input": "hi"},
                 201 if admin else 403),
                ("attach to conversation", "POST", "/conversations", {"conversation_id": conversation},
                 201 if admin else 403),
            ]

        seen_in_inbox: dict[str, bool] = {}
        for who in CALLERS:
            headers = auth(who) if who != "none" else {}
            async with stack.http() as http:
                for name, method, path, body, expected in endpoints(who if who != "none" else "mallory"):
                    if method == "GET" and "events" in path and expected == 200:
                        async with http.stream("GET", path, headers=headers) as response:
                            status = response.status_code
                    else:
                        response = await http.request(method, path, json=body, headers=headers)
                        status = response.status_code
                    want = 401 if who == "none" else expected
                    assert status == want, (who, name, status, response.text if status != 200 else "")
                    if status >= 400:
                        assert response.headers["content-type"].startswith("application/problem+json")
                    if name == "pending approvals" and status == 200:
                        seen_in_inbox[who] = any(p["prompt_id"] == shared_id for p in response.json())
                    if name == "list prompts" and status == 200:
                        assert who != "mallory" or all(p["user_id"] == "mallory" for p in response.json())
        assert seen_in_inbox == {"mallory": False, "ann": True, "root": True}
        for (what, who), (prompt_id, call_id) in fresh.items():
            prompt = await stack.agent.prompt(prompt_id).result()
            if what in ("approve", "reject"):
                decision = prompt.tool_call(call_id).decision  # type: ignore[union-attr]
                assert decision is not None and decision.by == who
            if what == "cancel":
                assert prompt.state == "cancelled"
