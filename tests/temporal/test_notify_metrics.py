"""Notification outcomes on the worker's Prometheus endpoint: `dagent worker --metrics-port` as a subprocess
whose Slack is reachable (a fake on loopback) and whose webhook receiver is not; a step still being retried when
the call is decided is called off, and the prompt finishes without waiting for it."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.cli.devserver import free_port
from durable_agent.client import AgentClient
from tests.fakes.notify_servers import SLACK_TOKEN, WEBHOOK_SECRET, FakeSlack, WebhookReceiver
from tests.support.notify import notify_toml
from tests.support.processes import WorkerProcess
from tests.support.workers import TEST_SETTINGS
from tests.temporal.test_metrics import Samples, scrape, total, wait_for, worker_env

NAME = "dagent_approval_notifications_total"  # dagent.approval.notifications as Prometheus spells it


async def test_sent_and_failed_notifications_are_counted(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    with WebhookReceiver() as stopped:
        dead_url = stopped.url
    port = free_port()
    queue = f"notify-metrics-{uuid.uuid4().hex[:8]}"
    with FakeSlack() as slack:
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN,
                             webhook_url=dead_url, webhook_secret=WEBHOOK_SECRET)
        env = worker_env(dev_env, tmp_path, DAGENT_TASK_QUEUE=queue, DAGENT_PLUGINS="tests.support.notify:plugin",
                         DAGENT_MODEL_NORMAL="scripted:tests.support.notify:model",
                         DAGENT_NOTIFY_CONFIG=str(config))
        worker = WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port))
        try:
            await wait_for(worker.ready, "worker ready", 60, worker.log)
            client = await AgentClient.connect(TEST_SETTINGS.model_copy(
                update={"task_queue": queue, "temporal_address": env["TEMPORAL_ADDRESS"]}))
            handle = await client.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            after: Samples = {}

            def counted() -> bool:
                nonlocal after
                after = scrape(port)
                return (total(after, NAME, dagent_notify_channel="slack", dagent_notify_outcome="sent") >= 1
                        and total(after, NAME, dagent_notify_channel="webhook", dagent_notify_outcome="failed") >= 1)

            await wait_for(counted, "a sent Slack step and a failed webhook attempt", 30, worker.log)
            assert (await handle.get()).state == "waiting_for_approval"  # a failing channel holds nothing up
            await handle.approve("call_r1_0", by="fin", roles=["finance"])
            prompt = await handle.result()
        finally:
            worker.kill()
    entry = prompt.output[0]
    assert prompt.state == "completed" and isinstance(entry, ToolOutput)
    assert total(after, NAME, dagent_notify_channel="webhook", dagent_notify_outcome="sent") == 0
    # The webhook step, still being retried when the call was approved, was called off (no message after the
    # decision), and the prompt did not wait for it; the Slack message was updated.
    assert [(n.step, n.error) for n in entry.notifications if n.channel == "webhook"] == [
        ("requested", "not sent: the call was decided first")]
    assert [n.step for n in entry.notifications if n.channel == "slack"] == ["requested", "decided"]
    assert "xoxb" not in worker.log() and WEBHOOK_SECRET not in worker.log()  # no secret in the worker's log
