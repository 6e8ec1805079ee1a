"""pytest fixtures for a team's tests of its tools and agents (docs/testing.md). In your top-level conftest.py:

    pytest_plugins = ["durable_agent.pytest_plugin"]

`agent_env`: an `AgentTestEnvironment` on Temporal's time-skipping test server, one per test, stopped after it.
Needs the `testing` extra (it brings pytest-asyncio and the test server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from durable_agent.testing import AgentTestEnvironment, test_settings


@pytest_asyncio.fixture
async def agent_env(tmp_path: Path) -> AsyncIterator[AgentTestEnvironment]:
    async with await AgentTestEnvironment.start_time_skipping(test_settings(tmp_path)) as env:
        yield env
