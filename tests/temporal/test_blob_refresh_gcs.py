"""`dagent store refresh` on GCS (issue 27): an age-based lifecycle rule never deletes what an open
conversation still references, because the refresh rewrites those objects (a new generation: a new creation
time, which a GCS `age` condition counts from).

Real dev server and workers; the store is gcp-storage-emulator (the GCS JSON API on loopback), reached through
the same gcloud-aio client as production. The emulator cannot make time pass, so aging is the one test double:
every object's `timeCreated` is set 50 days back in the emulator's own table (say so here, as the rules ask).
The 45-day rule is then applied as GCS applies one, through the API: every object created more than 45 days
ago is deleted. Without the refresh it would take the conversation's history chain; after `dagent store
refresh --older-than 7d` (the CLI, as a subprocess) it takes none of it, and a third turn on a new worker with
nothing cached sees both earlier turns.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.client import AgentClient
from durable_agent.config.storage.files import encode_segment
from durable_agent.config.storage.gcs import GCSObjects
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.temporal.test_blob_refresh import PLUGIN, RULE_DAYS, _script

BUCKET = "dagent-refresh"


def _age_everything(storage: object, days: float) -> None:
    """The test double for time passing: the emulator's own record of each object's creation, moved back."""
    then = (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for obj in storage.objects.get(BUCKET, {}).values():  # type: ignore[attr-defined]
        obj["timeCreated"] = then


def _expired(storage: object) -> list[str]:
    cutoff = datetime.now(UTC) - timedelta(days=RULE_DAYS)
    return sorted(name for name, obj in storage.objects.get(BUCKET, {}).items()  # type: ignore[attr-defined]
                  if datetime.fromisoformat(obj["timeCreated"].replace("Z", "+00:00")) < cutoff)


async def _lifecycle_rule(objects: GCSObjects, storage: object) -> list[str]:
    """What a GCS `age: 45` rule does, through the API."""
    expired = _expired(storage)
    for name in expired:
        await (await objects.raw()).delete(BUCKET, name)
    return expired


async def test_gcs_refresh_keeps_an_open_conversations_blobs_from_an_age_rule(
        dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=BUCKET)
    server.start()
    try:
        host, port = server._api._httpd.server_address[:2]  # the emulator has no public accessor
        emulator = f"http://{host}:{port}"
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator)
        storage = server._storage
        address = dev_env.client.service_client.config.target_host
        settings = Settings(store=f"gs://{BUCKET}", payload_threshold=1024, temporal_address=address,
                            workflow_sandbox="strict", task_queue=f"gcs-refresh-{uuid.uuid4().hex[:8]}",
                            payload_dir=str(tmp_path / "p"), file_dir=str(tmp_path / "f"))
        view = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                      plugins=[DurableAgentPlugin(settings)])
        client = AgentClient(view, settings)
        model = ScriptedModel(_script)

        def worker() -> object:
            runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": model, "high": model})
            return create_worker(view, runtime, task_queue=settings.task_queue, settings=settings)

        async with worker():  # type: ignore[attr-defined]
            conversation = await client.start_conversation(user_id="long-gcs")
            for turn in (1, 2):
                prompt = await conversation.send(f"turn {turn}")
                assert (await (await conversation.prompt_started(prompt.id)).result()).state == "completed"

        chain = f"v0/ns/{encode_segment(view.namespace)}/files/wi/{encode_segment(conversation.id)}/"
        _age_everything(storage, days=50)
        would_go = _expired(storage)
        assert any(name.startswith(chain) for name in would_go), would_go  # the rule would take the chain
        assert any("/wt/" in name for name in would_go)  # and payloads

        env = {**os.environ, "TEMPORAL_ADDRESS": address, "DAGENT_STORE": f"gs://{BUCKET}",
               "STORAGE_EMULATOR_HOST": emulator, "DAGENT_TASK_QUEUE": settings.task_queue}
        done = await asyncio.to_thread(subprocess.run, [*DAGENT_CMD, "store", "refresh", "--older-than", "7d"],
                                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
                                       env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("re-wrote ") and done.stdout.rstrip().endswith("; 0 missing"), done.stdout

        objects = settings.blob_objects()
        assert isinstance(objects, GCSObjects)
        deleted = await _lifecycle_rule(objects, storage)
        assert not any(name.startswith(chain) for name in deleted), deleted
        assert len(deleted) < len(would_go)  # the closed prompts' own blobs still expire

        async with worker():  # type: ignore[attr-defined]  # a new worker: nothing cached, everything from GCS
            prompt = await conversation.send("turn 3")
            third = await (await conversation.prompt_started(prompt.id)).result()
        assert third.state == "completed", third.error
        assert third.output[-1].text == "3 messages, 3 reports"  # type: ignore[union-attr]
        await objects.aclose()
    finally:
        server.stop()
