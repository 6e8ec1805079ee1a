"""Diagnostics that name the cause: `dagent show` on a prompt whose task queue has no worker says so (and how
to start one on that queue) instead of waiting for a query to time out; a prompt encrypted by a client whose
codec key the worker lacks fails saying which key is missing, not "invalid PromptRequest input"."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support.processes import REPO_ROOT
from tests.temporal.test_codec import _settings
from tests.temporal.test_prompt_workflow import math_plugin


async def test_show_without_a_worker_names_the_queue_and_how_to_start_one(dev_env: WorkflowEnvironment) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "DAGENT_TASK_QUEUE": queue}
    env.pop("DAGENT_API_URL", None)
    client = await AgentClient.connect(Settings.from_env({
        "TEMPORAL_ADDRESS": env["TEMPORAL_ADDRESS"], "DAGENT_TASK_QUEUE": queue,
        "TEMPORAL_CONFIG_FILE": "/nonexistent/none.toml"}))
    prompt_id = (await client.start("hello", user_id="nobody")).id
    shown = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "durable_agent.cli", "show", prompt_id],
                                    env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                                    stdin=subprocess.DEVNULL, check=False)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert shown.stderr == (f"error: prompt {prompt_id} cannot be read: its record is asked of a worker, and no "
                            f"worker is polling task queue '{queue}' — start one with `DAGENT_TASK_QUEUE={queue} "
                            "dagent worker` (a worker on that queue) (the prompt waits and runs as soon as one "
                            "starts)\n"), shown.stderr
    assert "Timeout" not in shown.stderr


async def test_a_worker_without_the_clients_codec_key_names_it(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    encrypting = _settings(dev_env, tmp_path)  # the client's codec: keys k2 (active) and k1
    plain = encrypting.model_copy(update={"codec_keys": None, "codec_key_id": None})
    model = ScriptedModel([text("never asked")])
    runtime = build_runtime(plain, plugins=[math_plugin], providers={"normal": model, "high": model})
    worker_client = await AgentClient.connect(plain)
    client = await AgentClient.connect(encrypting)
    async with create_worker(worker_client.client, runtime, task_queue=plain.task_queue):
        prompt = await asyncio.wait_for((await client.start("secret", user_id="codec-user")).result(), 60)
    assert prompt.state == "failed" and not model.requests
    assert prompt.error == ("cannot read the PromptRequest input: the payload is encrypted with codec key 'k2' and "
                            "this worker has no codec key: start the worker with the client's DAGENT_CODEC_KEYS "
                            "(and DAGENT_CODEC_KEY_ID)"), prompt.error


def test_ls_refuses_a_limit_below_one() -> None:
    """`dagent ls --limit -3` printed "no prompts" and exited 0; it is a bad option, said before connecting."""
    ran = subprocess.run([sys.executable, "-m", "durable_agent.cli", "ls", "--limit", "-3"], cwd=REPO_ROOT,
                         env={**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1"}, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert ran.returncode == 2 and ran.stdout == "", ran.stdout
    assert "--limit" in ran.stderr and ">= 1" in ran.stderr.replace("greater than or equal to", ">="), ran.stderr
