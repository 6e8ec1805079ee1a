"""A webhook receiver decides back: it verifies the step's signature with `standardwebhooks`, then approves
through the signed-decision API with its own API key at the path the payload names. The decision holds only
for a principal the call's approvers name (the receiver's key is a finance approver here; an outsider's
is refused), and the API signs it for the workflow, which checks the token again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from tests.fakes.notify_servers import WEBHOOK_SECRET, WebhookReceiver
from tests.support.api import key_pair
from tests.support.notify import notify_toml, notify_worker, until, wire_plugin

ROBOT = ApiKey(principal="payments-bot", key="payments-bot-key-0123456789", roles=["finance"])
OUTSIDER = ApiKey(principal="eve", key="eve-key-0123456789abcdefgh", roles=["approver"])


async def test_a_verified_webhook_decides_back_through_the_api(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    private_pem, public_pem = key_pair()
    with WebhookReceiver() as hooks:
        config = notify_toml(tmp_path / "notify.toml", webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        async with notify_worker(dev_env, config, plugins=[wire_plugin(["webhook"])],
                                 decision_key=public_pem) as agent:
            handle = await agent.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            await until(lambda: hooks.steps() == ["requested"], "the signed webhook")
            event = next(iter(hooks.events.values()))  # verified by standardwebhooks in the receiver
            approve = event["data"]["links"]["approve"]
            api = ApiConfig(api_keys=[ROBOT, OUTSIDER], decision_private_key=private_pem)
            async with serve_in_background(create_app(agent, api)) as url, httpx.AsyncClient(base_url=url) as http:
                refused = await http.post(approve, headers={"Authorization": f"Bearer {OUTSIDER.key}"})
                assert refused.status_code == 403, refused.text
                assert (await handle.get()).state == "waiting_for_approval"
                decided = await http.post(approve, headers={"Authorization": f"Bearer {ROBOT.key}"}, timeout=60)
                assert decided.status_code == 200, decided.text
            prompt = await handle.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and entry.decision is not None
    assert (entry.decision.decision, entry.decision.by, entry.decision.via) == ("approved", "payments-bot",
                                                                                "role:finance")
    assert hooks.refused == 0 and hooks.steps() == ["requested"]


CFO = ApiKey(principal="carol", key="carol-cfo-key-0123456789ab", roles=["cfo"])


async def test_the_cfo_decides_through_the_api_once_escalated(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """With a 'day' of 1.5 s: before the escalation the API refuses the CFO (not named by the call); once the
    escalated step went out the call names role:cfo too, and the API lets her approve."""
    private_pem, public_pem = key_pair()
    with WebhookReceiver() as hooks:
        config = notify_toml(tmp_path / "notify.toml", webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        async with notify_worker(dev_env, config, plugins=[wire_plugin(["webhook"], day=timedelta(seconds=1.5))],
                                 decision_key=public_pem) as agent:
            handle = await agent.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            await until(lambda: hooks.steps() == ["requested"], "the first webhook")
            approve = next(iter(hooks.events.values()))["data"]["links"]["approve"]
            api = ApiConfig(api_keys=[ROBOT, CFO], decision_private_key=private_pem)
            async with serve_in_background(create_app(agent, api)) as url, httpx.AsyncClient(base_url=url) as http:
                cfo = {"Authorization": f"Bearer {CFO.key}"}
                early = await http.post(approve, headers=cfo)
                assert early.status_code == 403, early.text
                await until(lambda: "escalated" in hooks.steps(), "the escalation")
                listed = (await http.get("/approvals", headers=cfo)).json()
                assert [(item["tool"], item["approvers"], item["can_decide"]) for item in listed] == [
                    ("bank.wire", ["role:finance", "role:cfo"], True)]
                decided = await http.post(approve, headers=cfo, timeout=60)
                assert decided.status_code == 200, decided.text
            prompt = await handle.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and entry.decision is not None
    assert (entry.decision.by, entry.decision.via) == ("carol", "role:cfo")
