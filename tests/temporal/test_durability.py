"""Durability end to end (SPEC §8): real dev server on a SQLite file, workers as separate processes.

- A worker SIGKILLed while a prompt waits for approval: a new worker finishes it, the side effect happens
  exactly once (written by the new worker), nothing before the crash runs again, and the outputs equal
  those of a crash-free run. The approval-to-completion time after the crash guards the sticky-queue
  timeout (SDK default 10 s; ours 2 s).
- The dev server SIGKILLed (or stopped gracefully) and restarted on the same db file while a prompt waits:
  the worker process stays up and reconnects by itself, and the prompt completes with each tool run once.

The tools and model live in `tests/support/ledger.py`; the ledger file records every execution with the
pid of the worker that ran it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.models import ApprovalRequest, Prompt, ToolOutput, ToolSuccess
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import Settings
from tests.support.ledger import CHARGE_AMOUNT, read_ledger
from tests.support.records import shape

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPT_INPUT = "Note it, then charge the customer."
STICKY_GUARD_S = 7.0  # the SDK's default sticky timeout (10 s) would exceed this; ours (2 s) stays well under


class WorkerProcess:
    """`python -m cli worker` as a subprocess, output in a log file."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.log_path = cwd / f"{name}.log"
        self.ready_file = cwd / f"{name}.ready"  # written once the server sees the worker poll (workers/readiness.py)
        self._log = open(self.log_path, "wb")  # closed in stop()
        env = {**env, "DAGENT_READY_FILE": str(self.ready_file)}
        self.proc = subprocess.Popen([sys.executable, "-m", "durable_agent.cli", "worker"], env=env, cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    async def wait_ready(self, wait_s: float = 30.0) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            if self.ready_file.exists():
                return
            if not self.alive():
                raise AssertionError(f"{self.name} (pid {self.pid}) exited with {self.proc.returncode} "
                                     f"before it was ready. Log tail:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} (pid {self.pid}) not ready after {wait_s:.0f} s. "
                                     f"Log tail:\n{self.tail()}")
            await asyncio.sleep(0.05)

    def sigkill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        try:
            self.sigkill()
        finally:
            self._log.close()


class Rig:
    """One test's dev server (temp SQLite file, free port, headless), its workers and a client."""

    def __init__(self, tmp_path: Path, plugin_module: str = "tests.support.ledger") -> None:
        self.tmp = tmp_path
        self.plugin_module = plugin_module  # its `plugin` and `model` are the workers' plugin and scripted model
        self.ledger = tmp_path / "ledger.jsonl"
        self.queue = f"durability-{uuid.uuid4().hex[:8]}"
        self.server = DevServer(db_file=tmp_path / "temporal.db", ui_port=None)
        self.workers: list[WorkerProcess] = []
        self._client: AgentClient | None = None

    @property
    def client(self) -> AgentClient:
        assert self._client is not None
        return self._client

    def worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "TEMPORAL_ADDRESS": self.server.address,
            "DAGENT_TASK_QUEUE": self.queue,
            "DAGENT_PLUGINS": f"{self.plugin_module}:plugin",
            "DAGENT_MODEL_NORMAL": f"scripted:{self.plugin_module}:model",
            "DAGENT_TEST_LEDGER": str(self.ledger),
            "DAGENT_FILE_DIR": str(self.tmp / "files"),
            "DAGENT_LOG_LEVEL": "INFO",
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p),
        })
        return env

    async def start(self) -> None:
        await self.server.start_async()
        self._client = await AgentClient.connect(Settings(temporal_address=self.server.address,
                                                          task_queue=self.queue))

    async def start_worker(self) -> WorkerProcess:
        worker = WorkerProcess(f"worker{len(self.workers) + 1}", self.worker_env(), self.tmp)
        self.workers.append(worker)
        try:
            await worker.wait_ready()
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics()}") from None
        return worker

    def diagnostics(self) -> str:
        parts = [f"--- {w.name} (pid {w.pid}, {'alive' if w.alive() else f'exit {w.proc.returncode}'}) "
                 f"log tail:\n{w.tail()}" for w in self.workers]
        parts.append(f"--- dev server log tail:\n{self.server.log_tail(15)}")
        parts.append(f"--- ledger:\n{self.ledger.read_text() if self.ledger.exists() else '(none)'}")
        return "\n".join(parts)

    async def within(self, awaitable: Awaitable[T], seconds: float, what: str) -> T:
        try:
            return await asyncio.wait_for(awaitable, seconds)
        except TimeoutError:
            raise AssertionError(f"timed out after {seconds:.0f} s: {what}\n{self.diagnostics()}") from None

    async def wait_state(self, handle: PromptHandle, state: str, wait_s: float = 30.0) -> Prompt:
        """Poll the record until `state`; tolerates RPC errors (server restarting, worker reconnecting)."""
        deadline = time.monotonic() + wait_s
        last: str = "no answer yet"
        while time.monotonic() < deadline:
            try:
                prompt = await asyncio.wait_for(handle.get(), max(0.5, deadline - time.monotonic()))
            except (RPCError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if prompt.state == state:
                    return prompt
                last = f"state {prompt.state}"
                if prompt.state in ("completed", "failed", "cancelled"):
                    break
            await asyncio.sleep(0.1)
        raise AssertionError(f"prompt {handle.id} did not reach {state!r} within {wait_s:.0f} s "
                             f"(last: {last})\n{self.diagnostics()}")

    async def approve(self, handle: PromptHandle, call_id: str, wait_s: float = 20.0) -> None:
        """Send the approve *signal*; retried only while the server is unreachable (not delivered)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                await handle.approve(call_id, by="alice")
                return
            except RPCError as exc:
                if exc.status != RPCStatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise AssertionError(f"approve signal failed: {exc}\n{self.diagnostics()}") from exc
                await asyncio.sleep(0.1)

    async def finish(self, handle: PromptHandle, wait_s: float, what: str) -> Prompt:
        prompt = await self.within(handle.result(), wait_s, what)
        assert prompt.state == "completed", f"{what}: state {prompt.state}, error {prompt.error}\n" \
                                            f"{self.diagnostics()}"
        return prompt

    def lines(self, prompt_id: str, kind: str) -> list[dict[str, Any]]:
        return [line for line in read_ledger(self.ledger)
                if line["kind"] == kind and str(line["key"]).startswith(f"{prompt_id}/")]

    async def close(self) -> None:
        errors: list[BaseException] = []
        for worker in self.workers:
            try:
                worker.stop()
            except BaseException as exc:  # keep killing the rest
                errors.append(exc)
        await asyncio.to_thread(self.server.kill)
        if errors:
            raise errors[0]


@asynccontextmanager
async def started_rig(tmp_path: Path, plugin_module: str = "tests.support.ledger") -> AsyncIterator[Rig]:
    """A started `Rig` whose workers load `plugin_module`'s plugin and scripted model; closed afterwards."""
    setup = Rig(tmp_path, plugin_module)
    try:
        await setup.start()
        yield setup
    finally:
        await setup.close()


def ledger_lines(ledger: Path) -> list[dict[str, int]]:
    """The ledger file's JSON lines (none before its first write)."""
    return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []


@pytest_asyncio.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with started_rig(tmp_path) as setup:
        yield setup


def pending_call(prompt: Prompt) -> ToolOutput:
    pending = [e for e in prompt.output if isinstance(e, ToolOutput) and isinstance(e.result, ApprovalRequest)]
    assert len(pending) == 1, f"expected one pending call, got {prompt.output}"
    assert pending[0].tool == "ledger.charge"
    return pending[0]


async def run_to_completion(rig: Rig) -> Prompt:
    """A crash-free run of the prompt: the reference output."""
    handle = await rig.client.start(PROMPT_INPUT, user_id="durability")
    waiting = await rig.wait_state(handle, "waiting_for_approval")
    await rig.approve(handle, pending_call(waiting).id)
    prompt = await rig.finish(handle, 30, "crash-free reference run")
    assert [e.type for e in prompt.output] == ["text", "tool", "tool", "text"], prompt.output
    note, charge = prompt.output[1], prompt.output[2]
    assert isinstance(note, ToolOutput) and isinstance(charge, ToolOutput)
    assert note.tool == "ledger.note" and isinstance(note.result, ToolSuccess)
    assert charge.tool == "ledger.charge" and isinstance(charge.result, ToolSuccess)
    assert charge.result.output == {"status": "charged", "amount": CHARGE_AMOUNT}
    assert charge.decision is not None and charge.decision.decision == "approved"
    return prompt


async def test_worker_sigkilled_while_waiting_for_approval(rig: Rig) -> None:
    worker1 = await rig.start_worker()
    reference = await run_to_completion(rig)

    handle = await rig.client.start(PROMPT_INPUT, user_id="durability")
    call = pending_call(await rig.wait_state(handle, "waiting_for_approval"))
    notes = rig.lines(handle.id, "note")
    assert [n["pid"] for n in notes] == [worker1.pid], notes  # the note finished before the pause
    assert rig.lines(handle.id, "charge.attempt") == []

    worker1.sigkill()
    assert worker1.proc.returncode == -9
    description = await rig.client.prompt(handle.id).workflow.describe()
    assert description.status == WorkflowExecutionStatus.RUNNING

    worker2 = await rig.start_worker()
    started = time.monotonic()
    await rig.approve(handle, call.id)
    prompt = await rig.finish(handle, 30, "prompt after the worker was SIGKILLed and replaced")
    approve_to_done = time.monotonic() - started
    print(f"\n[durability] worker SIGKILL: approval -> completed in {approve_to_done:.2f} s")

    charges = rig.lines(handle.id, "charge")
    assert len(charges) == 1, f"expected exactly one charge, ledger: {charges}"
    run_id = (await handle.workflow.describe()).run_id  # keys are run-scoped (docs/approvals-policy.md)
    assert charges[0]["pid"] == worker2.pid and charges[0]["key"] == f"{handle.id}/{run_id}/{call.id}"
    assert charges[0]["amount"] == CHARGE_AMOUNT
    assert [a["pid"] for a in rig.lines(handle.id, "charge.attempt")] == [worker2.pid]
    assert [n["pid"] for n in rig.lines(handle.id, "note")] == [worker1.pid], "ledger.note ran again"
    assert shape(prompt) == shape(reference)
    assert approve_to_done < STICKY_GUARD_S, (
        f"approval -> completion took {approve_to_done:.1f} s after a worker crash: the sticky queue "
        f"timeout is probably back at the SDK default (10 s)\n{rig.diagnostics()}")


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
async def test_server_restarted_while_waiting_for_approval(rig: Rig, how: str) -> None:
    worker = await rig.start_worker()
    reference = await run_to_completion(rig)

    handle = await rig.client.start(PROMPT_INPUT, user_id="durability")
    call = pending_call(await rig.wait_state(handle, "waiting_for_approval"))

    started = time.monotonic()
    await rig.server.restart_async(kill=how == "sigkill")
    restart_s = time.monotonic() - started
    assert worker.alive(), f"the worker died with the server\n{rig.diagnostics()}"

    # The prompt survived in the SQLite file and the same worker answers queries again (reconnected).
    await rig.wait_state(handle, "waiting_for_approval", wait_s=30)
    reconnect_s = time.monotonic() - started
    started = time.monotonic()
    await rig.approve(handle, call.id)
    prompt = await rig.finish(handle, 30, f"prompt after a dev server {how} + restart")
    approve_to_done = time.monotonic() - started
    print(f"\n[durability] server {how}: restart {restart_s:.2f} s, waiting again after {reconnect_s:.2f} s, "
          f"approval -> completed in {approve_to_done:.2f} s")

    assert worker.alive()
    assert [c["pid"] for c in rig.lines(handle.id, "charge")] == [worker.pid]
    assert [a["pid"] for a in rig.lines(handle.id, "charge.attempt")] == [worker.pid], "charge ran twice"
    assert [n["pid"] for n in rig.lines(handle.id, "note")] == [worker.pid], "ledger.note ran again"
    assert shape(prompt) == shape(reference)
