"""Retention that fits long conversations (issue 27): an age-based lifecycle rule never deletes what an open
workflow still references, because `dagent store refresh` re-writes those objects first.

Real dev server (the session `dev_env`), real workers, the blob store as directories (payloads above a small
threshold and the conversation's history chain). The lifecycle rule is simulated as S3 applies one: every
object last written more than 45 days ago is deleted. A conversation runs two turns; every object is then
made 50 days old. Applied to a copy of the store, the rule removes the conversation's history chain and
payloads (so a new turn could not load its history). After `refresh_live_blobs` the rule removes none of
them, and a third turn on a new worker (nothing cached) sees both earlier turns.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.config.storage.files import encode_segment
from durable_agent.config.storage.stores import objects_for
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.retention import refresh_live_blobs
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.workers import TEST_SETTINGS

REPORT_BYTES = 4096
RULE_DAYS = 45


class NoArgs(BaseModel):
    pass


@tool("report.fetch", local=False)
async def fetch_report(args: NoArgs, ctx: ToolContext) -> str:
    """A large tool output (stored outside history)."""
    return ctx.prompt_id[-4:] * (REPORT_BYTES // 4)


PLUGIN = Plugin("report", tools=[fetch_report])


def _script(request: ModelRequest) -> ModelResponse:
    """Round 1 fetches a report; round 2 says how many user messages and reports it sees."""
    if request.round == 1:
        return tool_calls(("report.fetch", {}))
    users = sum(isinstance(m, UserMessage) for m in request.messages)
    reports = sum(isinstance(m, ToolResultMessage) and len(m.content) >= REPORT_BYTES for m in request.messages)
    return text(f"{users} messages, {reports} reports")


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".store-id")]


def _age_everything(root: Path, days: float) -> None:
    then = time.time() - days * 86400
    for path in _files(root):
        os.utime(path, (then, then))


def _lifecycle_rule(root: Path) -> list[str]:
    """What an S3 age rule does: delete every object last written more than RULE_DAYS ago."""
    cutoff = time.time() - RULE_DAYS * 86400
    deleted = []
    for path in _files(root):
        if path.stat().st_mtime < cutoff:
            deleted.append(str(path.relative_to(root)))
            path.unlink()
    return deleted


async def test_refresh_keeps_an_open_conversations_blobs_from_an_age_rule(dev_env: WorkflowEnvironment,
                                                                          tmp_path: Path) -> None:
    store = tmp_path / "store"
    settings = TEST_SETTINGS.model_copy(update={
        "task_queue": f"tq-{uuid.uuid4().hex[:10]}", "payload_dir": str(store / "payloads"),
        "file_dir": str(store / "files"), "payload_threshold": 1024})
    view = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                  plugins=[DurableAgentPlugin(settings)])
    client = AgentClient(view, settings)
    model = ScriptedModel(_script)

    def worker() -> object:
        runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": model, "high": model})
        return create_worker(view, runtime, task_queue=settings.task_queue, settings=settings)

    async with worker():  # type: ignore[attr-defined]
        conversation = await client.start_conversation(user_id="long")
        for turn in (1, 2):
            prompt = await conversation.send(f"turn {turn}")
            assert (await (await conversation.prompt_started(prompt.id)).result()).state == "completed"

    conv_files = f"files/v0/ns/{encode_segment(view.namespace)}/files/wi/{encode_segment(conversation.id)}/"
    _age_everything(store, days=50)
    control = tmp_path / "control"
    shutil.copytree(store, control)
    without_refresh = _lifecycle_rule(control)
    assert any(key.startswith(conv_files) for key in without_refresh), without_refresh  # the chain would go
    assert any(key.startswith("payloads/") for key in without_refresh)

    stores = [objects_for("", settings.payload_dir), objects_for("", settings.file_dir)]
    report = await refresh_live_blobs(view, stores, older_than=timedelta(days=7), task_queue=settings.task_queue)
    assert report.missing == [] and report.workflows >= 1 and report.refreshed
    again = await refresh_live_blobs(view, stores, older_than=timedelta(days=7), dry_run=True,
                                   task_queue=settings.task_queue)
    assert again.refreshed == []  # fresh now: nothing older than 7 days is referenced

    deleted = _lifecycle_rule(store)
    assert not any(key.startswith(conv_files) for key in deleted), deleted
    assert len(deleted) < len(without_refresh)  # the closed prompts' own blobs still expire

    async with worker():  # type: ignore[attr-defined]  # a new worker: nothing cached, everything from the store
        prompt = await conversation.send("turn 3")
        third = await (await conversation.prompt_started(prompt.id)).result()
    assert third.state == "completed", third.error
    assert third.output[-1].text == "3 messages, 3 reports"  # type: ignore[union-attr]
