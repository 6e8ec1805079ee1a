"""A worker's start (issue #28: polling within 1.5 s): its build id comes from the loaded modules' file stats,
not from Temporal's default, which reads and unmarshals every loaded module's bytecode (about 0.65 s). The id
still changes when any loaded module's file does, and a deployment version still takes its place."""

from __future__ import annotations

import importlib
import os
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, code_build_id, connect, create_worker, loaded_code_digest


def test_the_digest_changes_when_a_loaded_module_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "startup_probe_module.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("startup_probe_module")
    try:
        before = loaded_code_digest()
        assert before == loaded_code_digest() and before.startswith("dagent-")
        module.write_text("VALUE = 22\n")  # another size
        assert loaded_code_digest() != before
        stat = module.stat()
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same size, later
        changed = loaded_code_digest()
        os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert changed != loaded_code_digest()
    finally:
        sys.modules.pop("startup_probe_module", None)


async def test_a_worker_without_a_deployment_uses_it(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    settings = Settings(temporal_address=dev_env.client.service_client.config.target_host,
                        task_queue=f"startup-{uuid.uuid4().hex[:8]}", file_dir=str(tmp_path / "files"),
                        payload_dir=str(tmp_path / "payloads"))
    client = await connect(settings)
    worker = create_worker(client, build_runtime(settings), task_queue=settings.task_queue, settings=settings)
    config = worker.config(active_config=True)  # the plugin gives it the build id
    assert config.get("deployment_config") is None and config.get("build_id") == code_build_id()

    versioned = settings.model_copy(update={"deployment_name": "startup", "build_id": "v7"})
    worker = create_worker(client, build_runtime(versioned), task_queue=settings.task_queue, settings=versioned)
    config = worker.config()
    assert config.get("build_id") is None  # exclusive with a deployment version
    deployment = config.get("deployment_config")
    assert deployment is not None and deployment.version.build_id == "v7"
