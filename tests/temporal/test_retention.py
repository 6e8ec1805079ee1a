"""Retention of blobs in the local directory: `dagent store sweep` removes the blobs of workflows that
Temporal no longer keeps (unknown, or closed for longer than the namespace's retention) and keeps the rest."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.client import AgentClient
from durable_agent.workers.retention import namespace_retention, sweep_directory
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support import bigblobs
from tests.support.processes import DAGENT_CMD

ROOT = Path(__file__).resolve().parents[2]


def _ghost(root: Path, workflow_id: str, age: timedelta) -> Path:
    """Blobs of a workflow Temporal has never heard of (or has already deleted), `age` old."""
    path = root / "v0/ns/default/wt/PromptWorkflow/wi" / workflow_id / "ri/null/d/sha256" / ("ab" * 32)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"orphan")
    stamp = time.time() - age.total_seconds()
    for item in (path, *path.parents):
        if item == root:
            break
        os.utime(item, (stamp, stamp))
    return path


async def test_sweep_removes_only_blobs_past_retention(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    env = {"TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"), "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
           "DAGENT_FILE_DIR": str(tmp_path / "files"), "DAGENT_PAYLOAD_THRESHOLD": "20000",
           "DAGENT_TASK_QUEUE": f"sweep-{uuid.uuid4().hex[:8]}", "DAGENT_WORKFLOW_SANDBOX": "strict"}
    settings = Settings.from_env(env)
    model = ScriptedModel(bigblobs._script)
    runtime = build_runtime(settings, plugins=[bigblobs.plugin], providers={"normal": model, "high": model})
    client = await AgentClient.connect(settings)
    payloads = tmp_path / "payloads"
    async with create_worker(client.client, runtime, task_queue=settings.task_queue):
        closed = await client.start("x " * 15_000)
        waiting = await closed.wait_until("waiting_for_approval")
        await closed.reject(next(o.id for o in waiting.output if getattr(o, "tool", "") == "blob.publish"))
        assert (await closed.result()).state == "completed"
        running = await client.start("y " * 15_000)
        assert (await running.wait_until("waiting_for_approval")).state == "waiting_for_approval"
    old_ghost = _ghost(payloads, "prompt-gone-long-ago", timedelta(hours=3))
    new_ghost = _ghost(payloads, "prompt-being-started", timedelta(minutes=1))
    for handle in (closed, running):
        assert list(payloads.glob(f"v0/ns/default/wt/PromptWorkflow/wi/{handle.id}/ri/*")), handle.id
        assert list((tmp_path / "files").glob(f"v0/ns/default/files/wi/{handle.id}/*")), handle.id

    # the command, now: only the old orphan goes (the closed prompt is within the 24 h+ retention)
    cli_env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGENT_", "TEMPORAL_"))} | env
    run = await asyncio.to_thread(subprocess.run, [*DAGENT_CMD, "store", "sweep"], cwd=ROOT,
                                  env=cli_env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "removed prompt-gone-long-ago" in run.stdout and "removed blobs of 1 workflow run(s)" in run.stdout
    assert not old_ghost.exists() and new_ghost.exists()

    # later than the namespace's retention after the close: the closed prompt's blobs and files go too
    retention = await namespace_retention(client.client)
    later = datetime.now(UTC) + retention + timedelta(hours=1)
    dry = await sweep_directory(client.client, [payloads, tmp_path / "files"], now=later, dry_run=True)
    assert closed.id in " ".join(dry.removed) and list(payloads.glob(f"v0/ns/default/wt/PromptWorkflow/wi/{closed.id}"))
    report = await sweep_directory(client.client, [payloads, tmp_path / "files"], now=later)
    assert not list(payloads.glob(f"v0/ns/default/wt/PromptWorkflow/wi/{closed.id}/ri/*"))
    assert not list((tmp_path / "files").glob(f"v0/ns/default/files/wi/{closed.id}/*"))
    assert not new_ghost.exists()  # unknown to Temporal and past the grace period by then
    # the running prompt keeps everything, whatever the date
    assert list(payloads.glob(f"v0/ns/default/wt/PromptWorkflow/wi/{running.id}/ri/*"))
    assert list((tmp_path / "files").glob(f"v0/ns/default/files/wi/{running.id}/*"))
    assert any(running.id in label for label in report.kept) and report.bytes_removed > 0
    await running.workflow.terminate("test done")
