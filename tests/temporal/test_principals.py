"""A principal is exactly one person (issue 41, review security-turn4 §1.9, 1.10): ids that begin with `user:` or
`role:` never authenticate (API keys refused at config load, OIDC subjects at verification), any other string an
IdP issues is one person recorded verbatim as the decider, and four-eyes compares the owner by the same rule as
the decider. Real HTTP against uvicorn, a real JWKS server, a real worker and dev server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from pytest_httpserver import HTTPServer
from temporalio.testing import WorkflowEnvironment

from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiConfigError, ApiKey, OidcConfig
from durable_agent.api.server import serve_in_background
from tests.support.api import PLUGIN, web_model
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


def _token(key: Any, sub: str, roles: list[str] | None = None) -> str:
    claims = {"sub": sub, "roles": roles or [], "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_api_keys_of_user_or_role_ids_refuse_to_load(tmp_path: Path) -> None:
    for principal in ("user:alice", "role:finance", "alice\n", ""):
        path = tmp_path / "api.toml"
        path.write_text(f'[[api_keys]]\nprincipal = {json.dumps(principal)}\nkey = "0123456789abcdef-key"\n')
        with pytest.raises(ApiConfigError, match="principal"):
            ApiConfig.load(path, env={})
    path.write_text('[[api_keys]]\nprincipal = "auth0|eve"\nkey = "0123456789abcdef-key"\n')
    assert ApiConfig.load(path, env={}).api_keys[0].principal == "auth0|eve"


async def test_oidc_subjects_are_one_person_each(dev_env: WorkflowEnvironment,
                                                 jwks_server: tuple[HTTPServer, Any]) -> None:
    """A `sub` of `user:alice` (or `role:...`) is refused; `auth0|eve` decides as herself, recorded verbatim."""
    server, key = jwks_server
    config = ApiConfig(oidc=OidcConfig(jwks_url=server.url_for("/jwks.json"), issuer=ISSUER, audience=AUDIENCE))
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent, \
            serve_in_background(create_app(agent, config)) as url, httpx.AsyncClient(base_url=url) as http:
        for sub in ("user:alice", "role:finance", "alice\n"):
            refused = await http.get("/me", headers={"Authorization": f"Bearer {_token(key, sub)}"})
            assert refused.status_code == 401, (sub, refused.text)
        eve = {"Authorization": f"Bearer {_token(key, 'auth0|eve', ['finance'])}"}
        me = await http.get("/me", headers=eve)
        assert me.status_code == 200 and me.json()["id"] == "auth0|eve", me.text
        bob = {"Authorization": f"Bearer {_token(key, 'bob')}"}
        prompt_id = (await http.post("/prompts", json={"input": "open vault b7"}, headers=bob)).json()["id"]
        prompt = await agent.prompt(prompt_id).wait_until("waiting_for_approval")
        call_id = prompt.output[-1].id  # type: ignore[union-attr]
        approved = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve", headers=eve)
        assert approved.status_code == 200, approved.text
        done = await agent.prompt(prompt_id).result()
    [call] = [o for o in done.output if getattr(o, "id", None) == call_id]
    assert call.decision is not None and call.decision.by == "auth0|eve", call.decision  # type: ignore[union-attr]


async def test_four_eyes_knows_the_owner_by_the_deciders_rule(dev_env: WorkflowEnvironment) -> None:
    """§1.10: a prompt whose user is recorded as `user:fin3` (started through the client) cannot be approved by
    fin3 under four-eyes; another finance user can."""
    keys = [ApiKey(principal="fin3", key="fin3-finance-key-0123456789", roles=["finance"]),
            ApiKey(principal="fin4", key="fin4-finance-key-0123456789", roles=["finance"]),
            ApiKey(principal="apu", key="apu-approver-key-0123456789", roles=["approver"])]
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model(), four_eyes=True) as agent, \
            serve_in_background(create_app(agent, ApiConfig(api_keys=keys))) as url, \
            httpx.AsyncClient(base_url=url, timeout=60) as http:
        handle = await agent.start("open vault b3", user_id="user:fin3")
        prompt = await handle.wait_until("waiting_for_approval")
        call_id = prompt.output[-1].id  # type: ignore[union-attr]
        own = await http.post(f"/prompts/{handle.id}/approvals/{call_id}/approve",
                              headers={"Authorization": "Bearer fin3-finance-key-0123456789"})
        assert own.status_code == 403 and "four-eyes" in own.json()["detail"], own.text
        other = await http.post(f"/prompts/{handle.id}/approvals/{call_id}/approve",
                                headers={"Authorization": "Bearer fin4-finance-key-0123456789"})
        assert other.status_code == 200, other.text
        # A call whose policy names nobody (payment.send over 100): the owner `user:apu`, an approver, is apu.
        unnamed = await agent.start("pay bob 250", user_id="user:apu")
        waiting = await unnamed.wait_until("waiting_for_approval")
        own = await http.post(f"/prompts/{unnamed.id}/approvals/{waiting.output[-1].id}/approve",  # type: ignore[union-attr]
                              headers={"Authorization": "Bearer apu-approver-key-0123456789"})
        assert own.status_code == 403 and "four-eyes" in own.json()["detail"], own.text
