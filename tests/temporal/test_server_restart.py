"""`dagent server` killed outright restarts on its own ports at once (the README's "the dev server killed and
restarted"): its port check binds as the server itself does, so the killed server's connections left in
TIME_WAIT do not make it refuse (ecosystem-turn4.md: `cannot listen on …: Address already in use`)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

from temporalio.client import Client

from durable_agent.cli.devserver import free_port, server_using
from durable_agent.cli.ui_links import SERVERS_DIR_ENV
from tests.support.processes import DAGENT_CMD


def _start(port: int, ui_port: int, tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([*DAGENT_CMD, "server", "--port", str(port), "--ui-port", str(ui_port),
                               "--db-file", str(tmp_path / "server.db")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    assert server.stdout is not None
    return server, server.stdout.readline()


async def test_dagent_server_restarts_on_its_port_right_after_a_sigkill(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    env = {**os.environ, "DAGENT_LOG_LEVEL": "WARNING", SERVERS_DIR_ENV: str(tmp_path / "servers")}
    first, banner = _start(port, ui_port, tmp_path, env)
    try:
        assert f"127.0.0.1:{port}" in banner, banner
        client = await Client.connect(f"127.0.0.1:{port}")
        await client.count_workflows()  # connections that the kill leaves in TIME_WAIT on the server's port
        temporal = server_using(str(tmp_path / "server.db"))  # the Temporal server `dagent server` runs
        assert temporal is not None
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    os.kill(temporal, signal.SIGKILL)  # the crash: the server itself dies, its connections in TIME_WAIT
    for _ in range(200):  # reaped by init within moments
        if server_using(str(tmp_path / "server.db")) is None:
            break
        await asyncio.sleep(0.05)
    second, banner = _start(port, ui_port, tmp_path, env)
    try:
        assert "cannot listen" not in banner and f"127.0.0.1:{port}" in banner, banner
        again = await Client.connect(f"127.0.0.1:{port}")
        assert await again.count_workflows() is not None
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(timeout=30)
