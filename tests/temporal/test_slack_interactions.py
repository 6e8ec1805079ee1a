"""Slack's Approve / Reject buttons posted to `dagent api` (`POST /slack/interactions`), signed as Slack signs them:
a valid click decides through the same desk as every other door; a bad signature, an old timestamp, an
unmapped user, a user outside the approvers and the prompt's own user under four-eyes are refused (the
refusal only to that user, through the response_url) and change nothing. Signed decision tokens are on, so
the click is checked by the API and again by the workflow. Afterwards every surface shows the same decision:
the Slack message (updated in place), the API's record, the client's query and `dagent show`."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.api.slack_config import SlackApiConfig
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from tests.fakes.notify_servers import SLACK_TOKEN, FakeSlack
from tests.support.api import key_pair
from tests.support.notify import notify_toml, notify_worker, until, wire_plugin
from tests.support.workers import TEST_SETTINGS

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
KEYS = [ApiKey(principal="fin", key="fin-key-0123456789abcdef", roles=["finance"]),
        ApiKey(principal="carol", key="carol-key-0123456789abcdef", roles=["cfo"]),
        ApiKey(principal="bob", key="bob-key-0123456789abcdefgh", roles=["finance"], email="Bob@Example.test")]


def _signed(body: str, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict[str, str]:
    timestamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": timestamp, "x-slack-signature": f"v0={digest}",
            "content-type": "application/x-www-form-urlencoded"}


def _click(slack: FakeSlack, message: dict[str, object], user: str, action: str, name: str) -> str:
    blocks = message["blocks"]
    assert isinstance(blocks, list)
    buttons = next(b for b in blocks if b["type"] == "actions")["elements"]
    button = next(b for b in buttons if b["action_id"] == action)
    payload = {"type": "block_actions", "user": {"id": user}, "response_url": slack.response_url(name),
               "actions": [{"action_id": action, "value": button["value"], "block_id": "dagent_decide"}]}
    return urlencode({"payload": json.dumps(payload)})


async def test_slack_buttons_decide_through_the_desk(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    private_pem, public_pem = key_pair()
    with FakeSlack() as slack:
        slack.users["UBOB"] = {"id": "UBOB", "profile": {"email": "bob@example.test"}}
        slack.users["UNOBODY"] = {"id": "UNOBODY", "profile": {"email": "nobody@example.test"}}
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN)
        api = ApiConfig(api_keys=KEYS, decision_private_key=private_pem, slack=SlackApiConfig(
            signing_secret=SIGNING_SECRET, bot_token=SLACK_TOKEN, base_url=slack.base_url,  # type: ignore[arg-type]
            users={"UFIN": "fin", "UCAROL": "carol"}))
        async with notify_worker(dev_env, config, plugins=[wire_plugin(["slack"], four_eyes=True)],
                                 decision_key=public_pem) as agent:
            handle = await agent.start("wire 500 to acme", user_id="fin")
            call = (await handle.wait_until("waiting_for_approval")).output[0]
            assert isinstance(call, ToolOutput)
            await until(lambda: len(slack.messages) == 1, "the Slack message")
            message = json.loads(json.dumps(slack.messages[0]))
            async with serve_in_background(create_app(agent, api)) as url, httpx.AsyncClient(base_url=url) as http:

                async def post(body: str, headers: dict[str, str]) -> int:
                    return (await http.post("/slack/interactions", content=body, headers=headers)).status_code

                async def still_waiting() -> None:
                    prompt = await handle.get()
                    entry = prompt.output[0]
                    assert prompt.state == "waiting_for_approval" and isinstance(entry, ToolOutput)
                    assert entry.decision is None and prompt.audit == [], prompt.audit

                good = _click(slack, message, "UBOB", "dagent_approve", "bad")
                assert await post(good, _signed(good, secret="not-the-secret")) == 401
                assert await post(good, _signed(good, at=int(time.time()) - 600)) == 401  # a replayed old click
                assert await post(good, {"content-type": "application/x-www-form-urlencoded"}) == 401
                assert await post(good.replace("UBOB", "UCAROL"), _signed(good)) == 401  # body changed after signing
                # carol (cfo) is not named by the call: as over HTTP, the prompt is not hers to see or decide
                refusals = [("UNOBODY", "not known to Durable Agent"), ("UCAROL", "belongs to another user"),
                            ("UFIN", "four-eyes")]
                for number, (user, why) in enumerate(refusals, 1):
                    body = _click(slack, message, user, "dagent_approve", f"r{number}")
                    assert await post(body, _signed(body)) == 200
                    await until(lambda n=number: len(slack.responses) == n, f"the refusal of {user}")  # type: ignore[misc]
                    answer = slack.responses[-1]
                    assert answer["response_type"] == "ephemeral" and answer["replace_original"] is False
                    assert why in answer["text"], answer
                    await still_waiting()
                assert slack.updates == []

                assert await post(good, _signed(good)) == 200  # bob, found by his Slack e-mail
                prompt = await handle.result()
                await until(lambda: len(slack.updates) == 1, "the Slack message updated in place")
                late = _click(slack, message, "UFIN", "dagent_reject", "late")
                assert await post(late, _signed(late)) == 200
                await until(lambda: len(slack.responses) == 4, "the late click's answer")
                assert slack.responses[-1]["text"].startswith("Not rejected: tool call")
                assert "already decided (approved by bob)" in slack.responses[-1]["text"]
                record = (await http.get(f"/prompts/{handle.id}",
                                         headers={"Authorization": f"Bearer {KEYS[0].key}"})).json()
            cli_env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                       "DAGENT_TASK_QUEUE": agent.settings.task_queue}
            shown = await asyncio.to_thread(  # the worker answers the query in this event loop meanwhile
                subprocess.run, [sys.executable, "-m", "durable_agent.cli", "show", handle.id], env=cli_env,
                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    entry = prompt.output[0]
    assert prompt.state == "completed" and isinstance(entry, ToolOutput) and entry.decision is not None
    assert (entry.decision.decision, entry.decision.by, entry.decision.via) == ("approved", "bob", "role:finance")
    api_entry = next(e for e in record["prompt"]["output"] if e.get("type") == "tool")
    assert (api_entry["decision"]["decision"], api_entry["decision"]["by"]) == ("approved", "bob")
    assert "by bob" in slack.messages[0]["text"] and "Approved" in json.dumps(slack.messages[0]["blocks"])
    assert shown.returncode == 0, shown.stderr
    assert "approved by bob" in shown.stdout, shown.stdout
    assert "told    slack requested -> UFIN" in shown.stdout, shown.stdout
    assert "told    slack decided -> DUFIN" in shown.stdout, shown.stdout  # the message updated in place


TREASURER = "You are the treasurer: wire what you are asked to."


def _delegating_model() -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
        if TREASURER in (request.instructions or ""):
            if request.round == 1:
                return tool_calls(("bank.wire", {"to": "acme", "amount": 500}))
            return text("Treasurer: " + " | ".join(results))
        if request.round == 1:
            return tool_calls(("treasury.delegate", {"task": "wire 500 to acme"}))
        return text("Coordinator: " + " | ".join(results))

    return ScriptedModel(script)


async def test_a_sub_agents_call_is_announced_and_decided_from_slack(dev_env: WorkflowEnvironment,
                                                                     tmp_path: Path) -> None:
    """The sub-agent's own prompt announces its waiting call (once: the parent only lists it); a click decides it
    on that prompt, the parent's listing drops it, and both prompts complete."""
    treasurer = SubAgent("treasury.delegate", description="Hand wires to the treasurer.", instructions=TREASURER,
                         plugins=("bank",), max_rounds=3)
    plugins = [wire_plugin(["slack"]), Plugin("delegation", tools=[treasurer.tool()])]
    with FakeSlack() as slack:
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN)
        api = ApiConfig(api_keys=KEYS, slack=SlackApiConfig(signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
                                                            users={"UFIN": "fin"}))
        settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}",
                                                    "notify_config": str(config)})
        model = _delegating_model()
        runtime = build_runtime(settings, plugins=plugins, providers={"normal": model, "high": model})
        async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue, settings=settings):
            agent = AgentClient(dev_env.client, settings)
            handle = await agent.start("have the treasurer wire 500 to acme", user_id="owner")
            await until(lambda: len(slack.messages) == 1, "the sub-agent's Slack message")
            message = json.loads(json.dumps(slack.messages[0]))
            target = json.loads(next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"])
            assert target["prompt"] != handle.id  # the sub-agent's prompt, which waits
            async with serve_in_background(create_app(agent, api)) as url, httpx.AsyncClient(base_url=url) as http:
                body = _click(slack, message, "UFIN", "dagent_approve", "sub")
                assert (await http.post("/slack/interactions", content=body, headers=_signed(body))).status_code == 200
                prompt = await handle.result()
                await until(lambda: len(slack.updates) == 1, "the Slack message updated")
    assert prompt.state == "completed", prompt.error
    assert "wired 500 to acme" in prompt.output[-1].text  # type: ignore[union-attr]
    assert len(slack.messages) == 1 and slack.responses == []  # announced once, decided without a refusal
    assert "by fin" in slack.messages[0]["text"]
