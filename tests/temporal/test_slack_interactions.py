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
from pathlib import Path
from urllib.parse import urlencode

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.api.slack_config import SlackApiConfig
from tests.fakes.notify_servers import SLACK_TOKEN, FakeSlack
from tests.support.api import key_pair
from tests.support.notify import notify_toml, notify_worker, until, wire_plugin

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
