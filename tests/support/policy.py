"""A tiered payment policy (the security review's `pay.send`) with a ledger of every payment that ran, a
scripted model (`pay <to> <amount>[; pay <to> <amount>]` -> calls in one response), and an API stack over them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import Approval, tool
from durable_agent.api import create_app
from durable_agent.api.config import ApiKey
from durable_agent.api.server import serve_in_background
from tests.support.api import ApiStack, api_config, key_pair
from tests.support.workers import agent_worker

LEDGER: list[tuple[str, float, str]] = []  # (to, amount, idempotency key) of every payment that ran
PAY = re.compile(r"pay ([\w-]+) (\d+)")
CFO_KEY = "cfo-person-key-0123456789abcdef"
FIN_KEY = "fin-finance-role-key-0123456789"


class PayInput(BaseModel):
    to: str
    amount: float
    memo: str = ""


def tiered(args: PayInput) -> Approval | None:
    """Up to 10: no approval. Up to 1000: alice or the finance role. Above, or offshore: the cfo in person."""
    if args.to.endswith("-offshore") or args.amount > 1000:
        return Approval(reason=f"Paying {args.amount:g} to {args.to} needs the CFO.", approvers=["user:cfo"])
    if args.amount <= 10:
        return None
    return Approval(reason=f"Paying {args.amount:g} needs alice or finance.", approvers=["alice", "role:finance"])


@tool("pay.send", approval=tiered)
async def pay(args: PayInput, ctx: ToolContext) -> dict[str, object]:
    """Send money."""
    LEDGER.append((args.to, args.amount, ctx.idempotency_key))
    return {"sent": args.amount, "to": args.to}


class NoteInput(BaseModel):
    note: str


@tool("audit.sign", approval=Approval(reason="Signing needs another person.", four_eyes=True))
async def sign(args: NoteInput, ctx: ToolContext) -> str:
    """Sign off a note (four-eyes)."""
    return f"signed {args.note}"


@tool("open.op", approval=Approval(reason="Any allowed person may decide."))
async def open_op(args: NoteInput, ctx: ToolContext) -> str:
    """An operation that names no approvers."""
    return f"done {args.note}"


PLUGIN = Plugin("policy", tools=[pay, sign, open_op])
SUB = SubAgent("sub.ask", description="Hand a payment to a sub-agent.", instructions="You are the payer.",
               plugins=("policy",), max_rounds=3)
AGENTS = Plugin("agents", tools=[SUB.tool()])


def _script(request: ModelRequest) -> ModelResponse:
    last_user = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    results = [m for m in request.messages[last_user:] if isinstance(m, ToolResultMessage)]
    if results:
        return text("; ".join(f"{r.tool} {'failed' if r.is_error else 'ok'}: {r.content}" for r in results))
    said = request.messages[last_user]
    assert isinstance(said, UserMessage)
    if said.text.startswith("sign "):
        return tool_calls(("audit.sign", {"note": said.text[5:]}))
    if said.text.startswith("delegate "):
        return tool_calls(("sub.ask", {"task": said.text[9:]}))
    if said.text.startswith("open "):
        return tool_calls(("open.op", {"note": said.text[5:]}))
    calls = [("pay.send", {"to": m[1], "amount": int(m[2])}) for m in PAY.finditer(said.text)]
    return tool_calls(*calls) if calls else text(f"You said: {said.text}")


def policy_model() -> ScriptedModel:
    return ScriptedModel(_script)


EXTRA_KEYS = [ApiKey(principal="cfo", key=CFO_KEY, roles=[]), ApiKey(principal="fin", key=FIN_KEY, roles=["finance"])]


@asynccontextmanager
async def policy_stack(env: WorkflowEnvironment, *, signed: bool = True, four_eyes: bool = False,
                       **config: object) -> AsyncIterator[ApiStack]:
    """A worker with the tiered policy (and the decision public key when `signed`) + the API on a real socket."""
    private_pem, public_pem = key_pair()
    async with agent_worker(env, plugins=[PLUGIN, AGENTS], model=policy_model(), four_eyes=four_eyes,
                            decision_key=public_pem if signed else None) as agent:
        app = create_app(agent, api_config(private_pem if signed else None, extra_api_keys=EXTRA_KEYS, **config))
        async with serve_in_background(app) as url:
            yield ApiStack(url=url, agent=agent, private_pem=private_pem, public_pem=public_pem)
