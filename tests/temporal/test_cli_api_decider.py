"""`dagent` deciding through the HTTP API (DAGENT_API_URL + DAGENT_API_KEY): the API records the key's person,
so a `--by` (or `run`'s `--user`) naming someone else is not used — and says so in one line, once, while the
decision is taken as the key's person. No warning when no name was given or it is the key's own. Real worker,
API on a real socket (open decisions), the CLI as a subprocess, the session's dev server."""

from __future__ import annotations

import asyncio
import os
import subprocess

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.api import create_app
from durable_agent.api.server import serve_in_background
from tests.support import batch_desk
from tests.support.api import USERS, api_config
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker


def _dagent(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT_CMD, *args], env=env, capture_output=True, text=True, timeout=120,
                          **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}))


async def _waiting(handle: object, count: int) -> None:
    for _ in range(400):
        if len(await handle.pending_approvals()) == count:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} calls waiting")


async def test_a_by_that_is_not_the_keys_person_warns_in_one_line(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        async with serve_in_background(create_app(client, api_config(None))) as url:
            handle = await client.start("batch: pay both invoices and email ACME", user_id="alice")
            await _waiting(handle, 3)
            env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                   "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING",
                   "DAGENT_API_URL": url, "DAGENT_API_KEY": USERS["ann"][0]}

            def cli() -> dict[str, subprocess.CompletedProcess[str]]:
                return {
                    "by bob": _dagent(env, "approve", handle.id, "call_r1_0", "--by", "bob"),
                    "no by": _dagent(env, "reject", handle.id, "call_r1_1", "--reason", "later"),
                    "by ann": _dagent(env, "approve", handle.id, "call_r1_2", "--by", "user:ann"),
                    "run as bob": _dagent(env, "run", "pay the ACME invoice", "--interactive", "--user", "bob",
                                          stdin="y\n"),
                }

            ran = await asyncio.to_thread(cli)
            batch = await handle.result()

    warning = (f"warning: --by bob is not used: decisions through DAGENT_API_URL ({url}) are recorded as ann, "
               "the person DAGENT_API_KEY authenticates")
    by_bob = ran["by bob"]
    assert by_bob.returncode == 0, by_bob
    assert by_bob.stderr.splitlines() == [warning], by_bob.stderr
    assert "approved by ann" in by_bob.stdout
    for quiet in ("no by", "by ann"):
        assert ran[quiet].returncode == 0 and ran[quiet].stderr == "", (quiet, ran[quiet])
    assert [(c.decision.decision, c.decision.by) for c in batch.output if isinstance(c, ToolOutput)] == [  # type: ignore[union-attr]
        ("approved", "ann"), ("rejected", "ann"), ("approved", "ann")]

    run = ran["run as bob"]  # the question's answer goes through the API too: the warning is a line of the run
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("warning: --user bob is not used: decisions through DAGENT_API_URL") == 1, run.stdout
    assert "payment.send approved by ann at" in run.stdout, run.stdout
