"""A bench script's scratch dev server: its SQLite file in RAM (/dev/shm) and a work directory, both removed
when the script is done; or a dev server in a temporary directory with one scripted worker."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.agent.tools import Tool
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, connect, create_worker


def _db_file(prefix: str) -> Path:
    return Path("/dev/shm") / f"{prefix}-{os.getpid()}.db"


def scratch_server(prefix: str) -> tuple[DevServer, Path]:
    """A dev server (not started yet) and the work directory its log and the run's files go to."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dagent-{prefix}-"))
    return DevServer(db_file=_db_file(prefix), log_file=workdir / "temporal.log"), workdir


def remove_scratch(prefix: str, workdir: Path) -> None:
    """The server's database files and the work directory (the server stopped first)."""
    db_file = _db_file(prefix)
    for leftover in db_file.parent.glob(f"{db_file.name}*"):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(workdir, ignore_errors=True)


@contextlib.asynccontextmanager
async def scripted_agent(task_queue: str, bench_tool: Tool[Any], model: ScriptedModel) -> AsyncIterator[AgentClient]:
    """A dev server in a temporary directory and one worker with `bench_tool` and the scripted `model` polling
    `task_queue`; yields the client prompts are started with (its `client` and `settings` as an app has them)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with DevServer(db_file=Path(tmp) / "t.db") as server:
            settings = Settings(temporal_address=server.address, task_queue=task_queue,
                                payload_dir=f"{tmp}/payloads", file_dir=f"{tmp}/files")
            client = await connect(settings)
            runtime = build_runtime(settings, plugins=[Plugin("bench", tools=[bench_tool])],
                                    providers={"normal": model})
            async with create_worker(client, runtime, task_queue=task_queue):
                yield AgentClient(client, settings)
