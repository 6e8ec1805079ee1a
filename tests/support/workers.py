"""A worker per test on a fresh task queue, configured by the same `DurableAgentPlugin` as production."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.client import AgentClient
from durable_agent.workers.settings import ModelCalls, Settings
from durable_agent.workers.worker import build_runtime, create_worker

# The strict sandbox: any non-deterministic call in workflow code fails the test (and the replay test).
TEST_SETTINGS = Settings(payload_dir=".dagent/test-payloads", file_dir=".dagent/test-files",
                         workflow_sandbox="strict")


@asynccontextmanager
async def agent_worker(env: WorkflowEnvironment, *, plugins: Sequence[Plugin], model: ModelProvider,
                       high_model: ModelProvider | None = None, services: Mapping[str, Any] | None = None,
                       file_dir: str = ".dagent/test-files", decision_key: str | None = None,
                       stream_text: bool | None = None, four_eyes: bool = False,
                       model_calls: ModelCalls = "activity") -> AsyncIterator[AgentClient]:
    """A worker with these plugins and model on a fresh task queue, and a client bound to that queue.
    `decision_key`: the public key decisions must be signed with; `stream_text`: stream model text;
    `four_eyes`: the deployment-wide four-eyes rule (Settings.four_eyes); `model_calls`: the worker's
    DAGENT_MODEL_CALLS (its prompts' model calls as local activities with `local`)."""
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "file_dir": file_dir,
                                                "decision_public_key": decision_key, "stream_text": stream_text,
                                                "four_eyes": four_eyes, "model_calls": model_calls})
    runtime = build_runtime(settings, plugins=plugins,
                            providers={"normal": model, "high": high_model or model}, services=services)
    async with create_worker(env.client, runtime, task_queue=settings.task_queue, settings=settings):
        yield AgentClient(env.client, settings)
