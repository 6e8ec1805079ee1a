"""Worker readiness against the real dev server: `dagent worker --ready-file PATH` writes the file only once the
server lists the worker as a poller of its queue, `dagent worker-ready` exits 0 then and 1 before, and the file
goes away when the worker drains on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.testing import WorkflowEnvironment

from durable_agent.workers.readiness import read_ready
from tests.support.processes import DAGENT_CMD, REPO_ROOT, WorkerProcess


def probe(ready_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT_CMD, "worker-ready", "--ready-file", str(ready_file)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


async def wait_for(check: Callable[[], bool], what: str, worker: WorkerProcess, wait_s: float = 60) -> None:
    deadline = time.monotonic() + wait_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {wait_s:.0f} s\nworker log:\n{worker.log()}")
        await asyncio.sleep(0.1)


async def test_ready_file_follows_the_workers_polling(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    queue = f"ready-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "worker.log"
    ready_file = log_path.with_suffix(".ready")  # WorkerProcess passes it as $DAGENT_READY_FILE
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update({"TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host, "DAGENT_TASK_QUEUE": queue,
                "DAGENT_PLUGINS": "tests.scenarios:plugin", "DAGENT_MODEL_NORMAL": "scripted:tests.scenarios:model",
                "DAGENT_FILE_DIR": str(tmp_path / "files")})
    before = probe(ready_file)
    assert before.returncode == 1 and before.stderr.startswith(f"not ready: no ready file at {ready_file}")

    worker = WorkerProcess(env, log_path)
    assert worker.ready_file == ready_file
    try:
        await wait_for(ready_file.exists, "the ready file", worker)
        state = read_ready(ready_file)
        assert state.pid == worker.pid and state.queues == [queue]
        reply = await dev_env.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace="default", task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW), retry=True)
        assert state.identity in [p.identity for p in reply.pollers]  # written only once the server saw it poll

        ready = probe(ready_file)
        assert ready.returncode == 0, ready.stderr
        assert ready.stdout.startswith(f"ready: pid {worker.pid} polling {queue} on ")

        worker.proc.send_signal(signal.SIGTERM)  # drains: not ready any more
        await wait_for(lambda: not ready_file.exists(), "the ready file removed", worker)
        assert worker.proc.wait(timeout=60) == 0
        after = probe(ready_file)
        assert after.returncode == 1 and "no ready file" in after.stderr
    finally:
        worker.kill()


def test_a_killed_workers_file_is_reported_stale(tmp_path: Path) -> None:
    """SIGKILL leaves the file behind; the probe sees that its pid is gone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    ready_file = tmp_path / "worker.ready"
    ready_file.write_text(f'{{"pid": {dead.pid}, "identity": "x", "address": "a", "queues": ["q"], '
                          '"since": "2026-01-01T00:00:00Z"}')
    stale = probe(ready_file)
    assert stale.returncode == 1
    assert stale.stderr.strip() == (f"not ready: worker pid {dead.pid} in {ready_file} is not running "
                                    "(a stale ready file)")
    ready_file.write_text("{}")
    broken = probe(ready_file)
    assert broken.returncode == 1 and broken.stderr.startswith(f"not ready: {ready_file} is not a ready file: ")
