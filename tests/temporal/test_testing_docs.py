"""docs/testing.md's example runs as a team would run it: its `conftest.py` and `test_payments.py` blocks
written to a directory outside the repository and run by pytest there (durable_agent.testing, the fixture,
the time-skipping server from the `testing` extra)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.processes import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "testing.md"


def titled_blocks(page: str) -> dict[str, str]:
    """The page's ```python title="NAME" blocks, by file name."""
    return dict(re.findall(r'```python title="([^"]+)"\n(.*?)```', page, flags=re.DOTALL))


def test_the_testing_page_example_passes_in_a_team_project(tmp_path: Path) -> None:
    blocks = titled_blocks(PAGE.read_text())
    assert set(blocks) == {"conftest.py", "test_payments.py"}
    for name, code in blocks.items():
        (tmp_path / name).write_text(code)
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "ignore::DeprecationWarning", "test_payments.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]


async def test_the_kit_on_the_dev_server_runs_a_prompt_and_answers_visibility(tmp_path: Path) -> None:
    from durable_agent.testing import AgentTestEnvironment, ScriptedModel, test_settings, text

    async with await AgentTestEnvironment.start_local(test_settings(tmp_path)) as env:
        async with env.worker(model=ScriptedModel([text("hi")])) as agents:
            prompt = await agents.run("Say hi", user_id="ann")
            listed: list[str] = []
            for _ in range(100):  # visibility (our search attributes, registered by the kit) lags a little
                listed = [row.prompt_id for row in await agents.list_prompts(user_id="ann")]
                if listed:
                    break
                await asyncio.sleep(0.1)
    assert prompt.state == "completed" and prompt.output[-1].text == "hi"  # type: ignore[union-attr]
    assert listed == [prompt.id]
