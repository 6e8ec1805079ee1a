"""Shared fixtures: one real Temporal dev server per test session, a worker per test on a fresh queue."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent.plugins import Plugin
from agent.providers.base import ModelProvider
from client import AgentClient
from tests.fakes.llm_server import PROTOCOLS, FakeLLMServer, WireProtocol
from workers.binaries import temporal_cli_path, test_server_path
from workers.devserver import extra_args_for_start_local, register_search_attributes
from workers.settings import Settings
from workers.worker import build_runtime, create_worker, workflow_runner

TEST_SETTINGS = Settings(payload_dir=".dagent/test-payloads", file_dir=".dagent/test-files")


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        data_converter=TEST_SETTINGS.data_converter(),
        dev_server_extra_args=extra_args_for_start_local(),
    )
    async with env:
        yield env


@pytest_asyncio.fixture(scope="session")
async def skip_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server: waits of days take milliseconds."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path(), data_converter=TEST_SETTINGS.data_converter(),
    )
    async with env:
        await register_search_attributes(env.client)
        yield env


@asynccontextmanager
async def agent_worker(env: WorkflowEnvironment, *, plugins: Sequence[Plugin], model: ModelProvider,
                       high_model: ModelProvider | None = None, services: Mapping[str, Any] | None = None,
                       file_dir: str = ".dagent/test-files") -> AsyncIterator[AgentClient]:
    """A worker with these plugins and model on a fresh task queue, and a client bound to that queue."""
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "file_dir": file_dir})
    runtime = build_runtime(settings, plugins=plugins,
                            providers={"normal": model, "high": high_model or model}, services=services)
    # The strict sandbox: any non-deterministic call in workflow code fails the test.
    async with create_worker(env.client, runtime, task_queue=settings.task_queue,
                             workflow_runner=workflow_runner("strict")):
        yield AgentClient(env.client, settings)


# --- provider tests: one fake LLM server per test module ----------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def llm(server: FakeLLMServer) -> FakeLLMServer:
    server.reset()
    return server


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> WireProtocol:
    return request.param  # type: ignore[no-any-return]
