"""Telling approvers on the time-skipping server: a signed webhook per step (verified by `standardwebhooks`), a
reminder after 1 day, an escalation after 2 that lets the CFO decide, nothing after the decision, expiry after 3;
and a channel that cannot be reached never holds up or fails the prompt."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ApprovalRequest, ToolOutput
from durable_agent.client import DecisionRefused
from tests.fakes.notify_servers import SLACK_TOKEN, WEBHOOK_SECRET, FakeSlack, SmtpSink, WebhookReceiver
from tests.support.notify import notify_toml, notify_worker, until, wire_plugin

DAY = timedelta(days=1)


def _call(prompt: object) -> ToolOutput:
    entry = prompt.output[0]  # type: ignore[attr-defined]
    assert isinstance(entry, ToolOutput)
    return entry


async def test_reminder_escalation_to_cfo_and_nothing_after_the_decision(skip_env: WorkflowEnvironment,
                                                                          tmp_path: Path) -> None:
    with WebhookReceiver() as hooks:
        config = notify_toml(tmp_path / "notify.toml", webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        async with notify_worker(skip_env, config, plugins=[wire_plugin(["webhook"])]) as client:
            handle = await client.start("wire 500 to acme", user_id="owner")
            call = _call(await handle.wait_until("waiting_for_approval"))
            assert isinstance(call.result, ApprovalRequest)
            await until(lambda: hooks.steps() == ["requested"], "the first webhook")
            with pytest.raises(DecisionRefused, match="may not decide"):
                await handle.approve(call.id, by="carol", roles=["cfo"], wait=True)

            await skip_env.sleep(DAY + timedelta(minutes=1))
            await until(lambda: hooks.steps() == ["requested", "reminder-1"], "the reminder after a day")
            with pytest.raises(DecisionRefused, match="may not decide"):  # not yet escalated
                await handle.approve(call.id, by="carol", roles=["cfo"], wait=True)

            await skip_env.sleep(DAY)
            await until(lambda: hooks.steps() == ["requested", "reminder-1", "escalated", "reminder-2"],
                        "the escalation after two days")
            pending = await handle.pending_approvals()
            assert pending[0].approvers == ["role:finance", "role:cfo"]
            decided = await handle.approve(call.id, by="carol", roles=["cfo"], wait=True)
            assert decided is not None and decided.decision is not None and decided.decision.via == "role:cfo"
            prompt = await handle.result()
            await skip_env.sleep(3 * DAY)  # past every step and the expiry: nothing more is sent
            await asyncio.sleep(0.3)
    assert prompt.state == "completed"
    entry = _call(prompt)
    assert entry.decision is not None and entry.decision.by == "carol"
    assert hooks.steps() == ["requested", "reminder-1", "escalated", "reminder-2"]
    assert len(hooks.deliveries) == 4 and hooks.refused == 0
    events = list(hooks.events.values())
    assert [e["type"] for e in events] == ["approval.requested", "approval.reminder", "approval.escalated",
                                           "approval.reminder"]
    assert events[0]["data"]["input"] == {"to": "acme", "amount": 500, "api_key": "[redacted]"}
    assert events[0]["data"]["to"] == ["role:finance"] and events[2]["data"]["to"] == ["role:cfo"]
    assert events[3]["data"]["to"] == ["role:finance", "role:cfo"]
    assert events[0]["data"]["links"]["approve"] == f"/prompts/{handle.id}/approvals/{call.id}/approve"
    sent = [(n.step, n.channel, n.ok, n.at - call.result.requested_at) for n in entry.notifications]
    assert [s[:3] for s in sent] == [("requested", "webhook", True), ("reminder-1", "webhook", True),
                                     ("escalated", "webhook", True), ("reminder-2", "webhook", True)]
    assert sent[0][3] < timedelta(minutes=1)
    assert DAY <= sent[1][3] < DAY + timedelta(minutes=2) and 2 * DAY <= sent[2][3] < 2 * DAY + timedelta(minutes=2)


async def test_unanswered_call_expires_after_three_days_with_its_steps(skip_env: WorkflowEnvironment,
                                                                        tmp_path: Path) -> None:
    with WebhookReceiver() as hooks:
        config = notify_toml(tmp_path / "notify.toml", webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        async with notify_worker(skip_env, config, plugins=[wire_plugin(["webhook"])]) as client:
            handle = await client.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            await until(lambda: hooks.steps() == ["requested"], "the first webhook")
            for _ in range(2):  # time skips only while nothing runs: a step at a time, then to the expiry
                count = len(hooks.steps())
                await skip_env.sleep(DAY + timedelta(minutes=1))
                await until(lambda count=count: len(hooks.steps()) > count, "the next step")  # type: ignore[misc]
            prompt = await handle.result()
            await asyncio.sleep(0.3)
    entry = _call(prompt)
    assert entry.decision is not None and entry.decision.decision == "expired"
    assert hooks.steps() == ["requested", "reminder-1", "escalated", "reminder-2"]  # none at or after the expiry


async def test_unreachable_channel_never_holds_up_the_prompt(skip_env: WorkflowEnvironment, tmp_path: Path) -> None:
    with WebhookReceiver() as hooks:
        url = hooks.url
    config = notify_toml(tmp_path / "notify.toml", webhook_url=url, webhook_secret=WEBHOOK_SECRET)  # stopped
    async with notify_worker(skip_env, config, plugins=[wire_plugin(["webhook"])]) as client:
        handle = await client.start("wire 500 to acme", user_id="owner")
        call = _call(await handle.wait_until("waiting_for_approval"))
        for _ in range(8):  # the retries' backoff (about a minute in all) passes on the skipping clock
            await skip_env.sleep(timedelta(seconds=20))
            failed = [n for n in _call(await handle.get()).notifications if not n.ok]
            if failed:
                break
            await asyncio.sleep(0.2)
        waiting = await handle.get()
        assert waiting.state == "waiting_for_approval"  # still waiting, not failed
        assert [(n.step, n.channel) for n in failed] == [("requested", "webhook")]
        assert "connect" in (failed[0].error or "").lower()
        listed = await handle.pending_approvals()  # what the inbox and GET /approvals show of the call
        assert [(n.step, n.ok) for n in listed[0].undelivered] == [("requested", False)]
        await handle.approve(call.id, by="fin", roles=["finance"])
        prompt = await handle.result()
    assert prompt.state == "completed"
    entry = _call(prompt)
    assert entry.decision is not None and entry.decision.decision == "approved"


async def test_email_and_slack_messages_and_the_slack_update_when_decided(skip_env: WorkflowEnvironment,
                                                                          tmp_path: Path) -> None:
    with FakeSlack() as slack, SmtpSink() as smtp:
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN,
                             smtp_port=smtp.port)
        async with notify_worker(skip_env, config, plugins=[wire_plugin(["slack", "email"])]) as client:
            handle = await client.start("wire 500 to acme", user_id="owner")
            call = _call(await handle.wait_until("waiting_for_approval"))
            await until(lambda: len(slack.messages) == 1 and len(smtp.messages) == 1, "the Slack message and e-mail")
            posted = json.loads(json.dumps(slack.messages[0]))  # as first posted (updated in place below)
            await handle.approve(call.id, by="fin", roles=["finance"])
            prompt = await handle.result()
            await until(lambda: len(slack.updates) == 1, "the Slack message updated in place")
    assert posted["channel"] == "DUFIN"  # role:finance -> fin -> their Slack id, in direct messages
    blocks = json.dumps(posted["blocks"])
    assert "bank.wire" in blocks and "Wires need finance." in blocks and "role:finance" in blocks
    assert "[redacted]" in blocks and "sk-live-secret" not in blocks and "sk-live-secret" not in posted["text"]
    actions = next(b for b in posted["blocks"] if b["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == ["dagent_approve", "dagent_reject", "dagent_open"]
    assert json.loads(actions[0]["value"]) == {"prompt": handle.id, "call": call.id}
    assert actions[2]["url"] == f"http://inbox.test/inbox#prompt={handle.id}&call={call.id}"
    updated = slack.messages[0]
    assert "Approved" in json.dumps(updated["blocks"]) and "by fin" in updated["text"]
    assert "dagent_approve" not in json.dumps(updated["blocks"])  # no buttons once decided
    assert slack.updates[0]["ts"] == posted["ts"]
    mail = smtp.messages[0]
    assert smtp.envelopes[0] == ("agent@example.test", ["fin@example.test"])
    body = mail.get_payload(decode=True).decode()  # quoted-printable on the wire
    assert f"http://inbox.test/inbox#prompt={handle.id}&call={call.id}" in body and "/approve" not in body
    assert "sk-live-secret" not in body and "[redacted]" in body
    assert mail["Message-ID"].endswith("@durable-agent>")
    entry = _call(prompt)
    steps = [(n.step, n.channel, n.ok) for n in entry.notifications]
    assert sorted(steps) == [("decided", "slack", True), ("requested", "email", True), ("requested", "slack", True)]
    emailed = next(n for n in entry.notifications if n.channel == "email")
    assert emailed.ok and emailed.to == ["fin@example.test"]  # sent, even if it was finishing as the call was decided


async def test_steps_survive_a_worker_restart_and_expiry_updates_slack(dev_env: WorkflowEnvironment,
                                                                      tmp_path: Path) -> None:
    """On the dev server with a "day" of 2 s: the first worker stops after the first message; the timers are
    the server's, and a new worker on the same queue sends the later steps and updates every message on
    expiry."""
    queue = f"tq-restart-{uuid.uuid4().hex[:8]}"
    day = timedelta(seconds=2)
    with FakeSlack() as slack:
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN)
        plugins = [wire_plugin(["slack"], day=day)]
        async with notify_worker(dev_env, config, plugins=plugins, task_queue=queue) as client:
            handle = await client.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            await until(lambda: len(slack.messages) == 1, "the first Slack message")
        assert len(slack.messages) == 1
        async with notify_worker(dev_env, config, plugins=plugins, task_queue=queue) as client:
            prompt = await client.prompt(handle.id).result()
            await until(lambda: len(slack.updates) == 5, "every message updated once the call expired")
    entry = _call(prompt)
    assert entry.decision is not None and entry.decision.decision == "expired"
    # requested, reminder-1 (finance), escalated (the CFO), reminder-2 (both, once escalated)
    assert [m["channel"] for m in slack.messages] == ["DUFIN", "DUFIN", "DUCAROL", "DUFIN", "DUCAROL"]
    assert all("Expired" in json.dumps(m["blocks"]) for m in slack.messages)
    decided = [n for n in entry.notifications if n.step == "decided"]
    assert len(decided) == 1 and len(decided[0].refs) == 5
