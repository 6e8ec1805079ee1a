"""Shared fixtures for both tiers: one real Temporal dev server per test session and a worker per test on a fresh
queue (tests/temporal/), the fake LLM server of the provider tests (tests/unit/ too); and the `slow` marker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from tests.fakes.llm_server import PROTOCOLS, FakeLLMServer, WireProtocol

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

# The longest runs (crash and kill loops, Chromium, docker compose configs, wheel installs), all in tests/temporal/:
# `pytest -m "not slow"` leaves them out, scripts/test runs everything (tests/unit/test_tiers.py checks the names).
SLOW_MODULES = frozenset({
    "test_crash_harness", "test_tracing_crash", "test_durability", "test_junk_payloads",  # crash and soak
    "test_ui_screenshot", "test_web_pages", "test_pages_truth",  # Chromium
    "test_compose", "test_compose_observability",  # docker compose configurations
    "test_install",  # wheels and fresh venvs
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    from temporalio.testing import WorkflowEnvironment  # here, not at the top: the unit tier never loads it

    from durable_agent.cli.devserver import extra_args_for_start_local
    from durable_agent.cli.devserver.binaries import temporal_cli_path
    from durable_agent.workers.plugin import DurableAgentPlugin
    from tests.support.workers import TEST_SETTINGS

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        plugins=[DurableAgentPlugin(TEST_SETTINGS)],
        dev_server_extra_args=extra_args_for_start_local(),
    )
    async with env:
        yield env


@pytest_asyncio.fixture(scope="session")
async def skip_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server: waits of days take milliseconds."""
    from temporalio.testing import WorkflowEnvironment

    from durable_agent.cli.devserver import register_search_attributes
    from durable_agent.cli.devserver.binaries import test_server_path
    from durable_agent.workers.plugin import DurableAgentPlugin
    from tests.support.workers import TEST_SETTINGS

    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path(), plugins=[DurableAgentPlugin(TEST_SETTINGS)],
    )
    async with env:
        await register_search_attributes(env.client)
        yield env


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
