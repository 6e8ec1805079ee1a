"""The web API under test: a real worker on the session's dev server, the app on a real uvicorn socket,
principals with API keys, and the Ed25519 key pair that signs decisions (made fresh per stack)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.client import AgentClient
from tests.support.workers import agent_worker


class PayInput(BaseModel):
    to: str
    amount: float


class VaultInput(BaseModel):
    box: str


def _pay_policy(args: PayInput) -> Approval | None:
    return Approval(reason=f"Sending ${args.amount:g} requires approval.") if args.amount > 100 else None


@tool("payment.send", approval=_pay_policy)
async def pay(args: PayInput, ctx: ToolContext) -> dict[str, object]:
    """Send money."""
    ctx.display_widget("receipt", {"to": args.to, "amount": args.amount})
    return {"sent": args.amount, "to": args.to}


@tool("vault.open", approval=Approval(reason="Opening a vault needs finance.", approvers=["role:finance"]))
async def open_vault(args: VaultInput, ctx: ToolContext) -> str:
    """Open a vault box."""
    return f"opened {args.box}"


PLUGIN = Plugin("web", tools=[pay, open_vault])
PAY = re.compile(r"pay (\w+) (\d+)")
VAULT = re.compile(r"open vault (\w+)")


def _script(request: ModelRequest) -> ModelResponse:
    """`pay bob 250` -> payment.send; `open vault b1` -> vault.open; after the results, a summary."""
    last_user = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    results = [m for m in request.messages[last_user:] if isinstance(m, ToolResultMessage)]
    if results:
        return text("Done: " + "; ".join(f"{r.tool} {'failed' if r.is_error else 'ok'}: {r.content}"
                                         for r in results))
    said = request.messages[last_user]
    assert isinstance(said, UserMessage)
    if match := PAY.search(said.text):
        return tool_calls(("payment.send", {"to": match[1], "amount": int(match[2])}), text="Paying now.")
    if match := VAULT.search(said.text):
        return tool_calls(("vault.open", {"box": match[1]}))
    return text(f"You said: {said.text}")


def web_model() -> ScriptedModel:
    return ScriptedModel(_script)


# principal -> (API key, roles)
USERS: dict[str, tuple[str, list[str]]] = {
    "alice": ("alice-key-0123456789abcdef", []),
    "mallory": ("mallory-key-0123456789abcdef", []),
    "ann": ("ann-approver-key-0123456789ab", ["approver"]),
    "fiona": ("fiona-finance-key-0123456789", ["approver", "finance"]),
    "root": ("root-admin-key-0123456789abcd", ["admin"]),
}


def key_pair() -> tuple[str, str]:
    """(private PEM, public PEM) of a fresh Ed25519 key."""
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()).decode()
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private_pem, public_pem


def api_config(private_pem: str | None, extra_api_keys: Sequence[ApiKey] = (), **options: object) -> ApiConfig:
    keys = [ApiKey(principal=name, key=key, roles=roles) for name, (key, roles) in USERS.items()]
    keys += list(extra_api_keys)
    return ApiConfig(api_keys=keys, decision_private_key=private_pem, **options)  # type: ignore[arg-type]


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {USERS[user][0]}"}


@dataclass
class ApiStack:
    url: str
    agent: AgentClient
    private_pem: str
    public_pem: str

    def http(self, user: str | None = None, **options: object) -> httpx.AsyncClient:
        headers = {**(auth(user) if user else {}), **options.pop("headers", {})}  # type: ignore[dict-item]
        options.setdefault("timeout", 60)
        return httpx.AsyncClient(base_url=self.url, headers=headers, **options)  # type: ignore[arg-type]


@asynccontextmanager
async def api_stack(env: WorkflowEnvironment, *, stream_text: bool | None = None, signed: bool = True,
                    **config: object) -> AsyncIterator[ApiStack]:
    """Worker (with the decision public key when `signed`) + API (with the private key) on real sockets."""
    private_pem, public_pem = key_pair()
    async with agent_worker(env, plugins=[PLUGIN], model=web_model(), stream_text=stream_text,
                            decision_key=public_pem if signed else None) as agent:
        app = create_app(agent, api_config(private_pem if signed else None, **config))
        async with serve_in_background(app) as url:
            yield ApiStack(url=url, agent=agent, private_pem=private_pem, public_pem=public_pem)
