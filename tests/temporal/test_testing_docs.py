"""docs/testing.md's example runs as a team would run it: its `conftest.py` and `test_payments.py` blocks
written to a directory outside the repository and run by pytest there (durable_agent.testing, the fixture,
the time-skipping server from the `testing` extra)."""

from __future__ import annotations

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
