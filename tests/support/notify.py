"""A worker whose approvals tell people (docs/telling-approvers.md), for the notification tests: a wire transfer
that finance approves, with a reminder after a day, an escalation to the CFO after two and expiry after three."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.notify import Notify
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.workers import TEST_SETTINGS


class WireInput(BaseModel):
    to: str
    amount: int
    api_key: str = "sk-live-secret"  # redacted in every message


def wire_notify(channels: Sequence[str], day: timedelta = timedelta(days=1)) -> Notify:
    """A reminder every `day`, an escalation to the CFO after two."""
    return Notify(channels=list(channels), to=["role:finance"], remind_after=day,  # type: ignore[arg-type]
                  max_reminders=5, escalate_after=2 * day, escalate_to=["role:cfo"])


def wire_plugin(channels: Sequence[str], *, four_eyes: bool = False, day: timedelta = timedelta(days=1)) -> Plugin:
    """`bank.wire`, approved by finance, expiring after three `day`s."""
    @tool("bank.wire", approval=Approval(reason="Wires need finance.", approvers=["role:finance"],
                                         expires_after=3 * day, notify=wire_notify(channels, day),
                                         four_eyes=four_eyes))
    async def wire(args: WireInput, ctx: ToolContext) -> str:
        """Wire money."""
        return f"wired {args.amount} to {args.to}"

    return Plugin("bank", tools=[wire])


def wire_model() -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(("bank.wire", {"to": "acme", "amount": 500, "api_key": "sk-live-secret"}))
        result = next(m for m in request.messages if isinstance(m, ToolResultMessage))
        return text(f"{'failed' if result.is_error else 'ok'}: {result.content}")

    return ScriptedModel(script)


def notify_toml(path: Path, *, webhook_url: str | None = None, webhook_secret: str | None = None,
                slack_url: str | None = None, slack_token: str | None = None, smtp_port: int | None = None,
                inbox_url: str = "http://inbox.test") -> Path:
    lines = [f'inbox_url = "{inbox_url}"']
    if webhook_url:
        lines += ["[webhook]", f'url = "{webhook_url}"', f'secret = "{webhook_secret}"']
    if slack_url:
        lines += ["[slack]", f'token = "{slack_token}"', f'base_url = "{slack_url}"', 'channel = "C-APPROVALS"']
    if smtp_port:
        lines += ["[email]", 'host = "127.0.0.1"', f"port = {smtp_port}", 'sender = "agent@example.test"',
                  "starttls = false"]
    lines += ["[people.fin]", 'email = "fin@example.test"', 'slack = "UFIN"',
              "[people.carol]", 'email = "carol@example.test"', 'slack = "UCAROL"',
              "[roles]", 'finance = ["fin"]', 'cfo = ["carol"]']
    path.write_text("\n".join(lines) + "\n")
    return path


@asynccontextmanager
async def notify_worker(env: WorkflowEnvironment, config: Path, *, plugins: Sequence[Plugin],
                        services: Mapping[str, Any] | None = None,
                        decision_key: str | None = None, task_queue: str | None = None) -> AsyncIterator[AgentClient]:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": task_queue or f"tq-{uuid.uuid4().hex[:10]}",
                                                "notify_config": str(config), "decision_public_key": decision_key})
    model = wire_model()
    runtime = build_runtime(settings, plugins=plugins, providers={"normal": model, "high": model}, services=services)
    async with create_worker(env.client, runtime, task_queue=settings.task_queue, settings=settings):
        yield AgentClient(env.client, settings)


async def until(check: Callable[[], bool], what: str, wait_s: float = 15.0) -> None:
    deadline = time.monotonic() + wait_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# For worker subprocesses (DAGENT_PLUGINS=tests.support.notify:plugin, DAGENT_MODEL_NORMAL=scripted:...:model).
plugin = wire_plugin(["slack", "webhook"])
model = wire_model()
