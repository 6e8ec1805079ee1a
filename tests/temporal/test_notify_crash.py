"""A worker SIGKILLed in the middle of sending a step: the step is retried on another worker and its recipients
get it once - Slack finds the message the dead worker posted (by the key in its metadata) and does not post it
again; the webhook is delivered again under the same `webhook-id`, which a receiver drops as seen."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from durable_agent.agent.models import ApprovalRequest, ToolOutput
from tests.fakes.notify_servers import SLACK_TOKEN, WEBHOOK_SECRET, FakeSlack, WebhookReceiver
from tests.support.notify import notify_toml, until
from tests.temporal.test_durability import started_rig


async def test_worker_killed_mid_send_yields_one_message_per_step(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSlack() as slack, WebhookReceiver() as hooks:
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN,
                             webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        monkeypatch.setenv("DAGENT_NOTIFY_CONFIG", str(config))
        async with started_rig(tmp_path, "tests.support.notify") as rig:
            slack.hold.arm()  # both channels take the first step's request, then hang until released
            hooks.hold.arm()
            worker1 = await rig.start_worker()
            handle = await rig.client.start("wire 500 to acme", user_id="owner")
            waiting = await rig.wait_state(handle, "waiting_for_approval")
            call = waiting.output[0]
            assert isinstance(call, ToolOutput) and isinstance(call.result, ApprovalRequest)
            await rig.within(asyncio.gather(asyncio.to_thread(slack.hold.reached.wait, 30),
                                            asyncio.to_thread(hooks.hold.reached.wait, 30)), 35,
                             "both channels reached mid-send")
            worker1.sigkill()  # the Slack message is posted and the webhook received; neither attempt completes
            slack.hold.go.set()
            hooks.hold.go.set()
            await rig.start_worker()
            # The dead attempt times out (15 s) and the step is retried on the new worker.
            await rig.within(until(lambda: len(hooks.deliveries) == 2, "the webhook's retry", 60), 65,
                             "the webhook retried")
            await until(lambda: "conversations.history" in slack.calls, "Slack's retry looking for its post", 30)
            entry = None
            for _ in range(100):
                current = (await handle.get()).output[0]
                assert isinstance(current, ToolOutput)
                if {n.channel for n in current.notifications} == {"slack", "webhook"}:
                    entry = current
                    break
                await asyncio.sleep(0.1)
            assert entry is not None, rig.diagnostics()
            await handle.approve(call.id, by="fin", roles=["finance"])
            prompt = await rig.finish(handle, 30, "the prompt after the crash mid-send")
            await until(lambda: len(slack.updates) == 1, "the Slack message updated", 20)
    assert prompt.state == "completed"
    assert len(slack.messages) == 1, slack.messages  # posted once, found again by the retry
    assert [n.refs for n in entry.notifications if n.channel == "slack"] == [
        [f"{slack.messages[0]['channel']}:{slack.messages[0]['ts']}"]]
    assert len(hooks.deliveries) == 2 and len(set(hooks.deliveries)) == 1  # the same webhook-id twice
    assert hooks.steps() == ["requested"]  # the receiver's view: one event
    assert hooks.deliveries[0].startswith(f"{handle.id}/") and hooks.deliveries[0].endswith(
        f"/{call.id}/requested/webhook")  # prompt/run/call/step/channel
