"""The ready file (workers/readiness.py) without a server: atomic write, read back, cleared only by its writer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durable_agent.workers.readiness import NotReady, ReadyFile, check_ready


def test_written_read_and_cleared_by_its_writer(tmp_path: Path) -> None:
    ready = ReadyFile(tmp_path / "sub" / "worker.ready")
    state = ready.mark_ready(identity="w@host", address="127.0.0.1:7400", queues=["agent", "models"])
    assert check_ready(ready.path) == state and state.pid == os.getpid()
    assert [p.name for p in ready.path.parent.iterdir()] == ["worker.ready"]  # no partial file left
    ready.clear()
    assert not ready.path.exists()
    with pytest.raises(NotReady, match="no ready file"):
        check_ready(ready.path)
    ready.clear()  # nothing to remove: fine


def test_another_workers_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "worker.ready"
    path.write_text('{"pid": 1, "identity": "other", "address": "a", "queues": ["q"], "since": "2026-01-01T00:00:00Z"}')
    ReadyFile(path).clear()
    assert check_ready(path).identity == "other"  # pid 1 is alive
