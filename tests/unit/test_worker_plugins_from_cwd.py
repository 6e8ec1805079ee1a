"""A bare `dagent worker` (the console script, as a container runs it) imports DAGENT_PLUGINS from the working
directory, as `dagent worker --any-option` (which re-execs `python -m`) always did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGENT_SCRIPT = Path(sys.executable).parent / "dagent"


@pytest.mark.parametrize("options", [[], ["--plugin", "teamplugins.finance:plugin"]], ids=["bare", "with-option"])
def test_dagent_worker_loads_a_plugin_from_the_working_directory(tmp_path: Path, options: list[str]) -> None:
    package = tmp_path / "teamplugins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "finance.py").write_text(
        "import pathlib\nfrom durable_agent import Plugin\n"
        "pathlib.Path('imported.marker').write_text('yes')\nplugin = Plugin('finance')\n")
    env = {**os.environ, "DAGENT_PLUGINS": "teamplugins.finance:plugin", "TEMPORAL_ADDRESS": "127.0.0.1:1",
           "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"), "DAGENT_FILE_DIR": str(tmp_path / "files"),
           "PYTHONPATH": ""}
    done = subprocess.run([str(DAGENT_SCRIPT), "worker", *options], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "cannot load plugin" not in done.stderr, done.stderr
    assert (tmp_path / "imported.marker").exists(), done.stderr
    assert "no Temporal server at 127.0.0.1:1" in done.stderr  # it got as far as connecting
