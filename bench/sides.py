"""The two sides of the benchmark (this project and the hand-rolled baseline) and their worker subprocesses."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from bench.baseline import WORKFLOW_NAME as BASELINE_WORKFLOW
from bench.baseline import BaselineInput, BaselineState, Message
from bench.config import BASELINE, PRODUCT, PRODUCT_UNSANDBOXED, REPO, log
from bench.scenario import Scenario
from durable_agent.agent.models import ApprovalRequest, ToolOutput, ToolSuccess
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import ModelCalls, Settings


class WorkerProcess:
    """One worker in its own process, so its memory can be read from /proc."""

    def __init__(self, label: str, cmd: list[str], env: dict[str, str], log_path: Path) -> None:
        self.label, self.cmd, self.env, self.log_path = label, cmd, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=REPO, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self.label} worker exited (log {self.log_path}):\n{self.log_tail()}")

    def memory(self) -> dict[str, int]:
        """Current (VmRSS) and peak (VmHWM) resident set size in bytes."""
        self.check_alive()
        found: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key.lower()] = int(value.split()[0]) * 1024
        return {"rss": found["vmrss"], "peak": found["vmhwm"]}

    def stop(self, timeout: float = 20.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.label} worker did not stop in {timeout:.0f} s; killing pid {proc.pid}")
            proc.kill()
            proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Run:
    """One started prompt on either side."""

    wf: WorkflowHandle[Any, Any]
    scenario: Scenario
    prompt: PromptHandle | None = None


class Side:
    name: str = ""

    def __init__(self, client: Client, address: str, workdir: Path, options: dict[str, Any]) -> None:
        self.client, self.address, self.workdir, self.options = client, address, workdir, options
        self.task_queue = ""
        self.worker: WorkerProcess | None = None

    # worker lifecycle
    def worker_command(self) -> list[str]:
        raise NotImplementedError

    def worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        # As installed (pip compiles every module): a development shell's PYTHONDONTWRITEBYTECODE=1 would make
        # each process compile every module of ours again, which is not what a user's worker or CLI pays.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def start_worker(self, section: str) -> WorkerProcess:
        self.stop_worker()
        self.task_queue = f"bench-{self.name}-{section}-{uuid.uuid4().hex[:6]}"
        self.worker = WorkerProcess(self.name, self.worker_command(), self.worker_env(),
                                    self.workdir / f"worker-{self.name}-{section}.log")
        self.worker.start()
        return self.worker

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    # prompts
    async def start(self, scenario: Scenario) -> Run:
        raise NotImplementedError

    async def finish(self, run: Run) -> None:
        """Wait for the result and check it did what the scenario says."""
        raise NotImplementedError

    async def wait_waiting(self, run: Run) -> str:
        """Wait until the prompt waits for approval; the pending tool call id."""
        raise NotImplementedError

    async def approve(self, run: Run, call_id: str) -> None:
        raise NotImplementedError

    async def result_visible(self, run: Run, call_id: str) -> bool:
        """Does the query show the approved call's result yet?"""
        raise NotImplementedError

    async def run(self, scenario: Scenario) -> float:
        t0 = time.perf_counter()
        await self.finish(await self.start(scenario))
        return time.perf_counter() - t0


def product_settings(address: str, workdir: Path, task_queue: str = "", *, model_calls: ModelCalls = "activity",
                     ) -> Settings:
    """The client settings of the project's side. Its client uses the project's own data converter
    (`workers.worker.connect`): pydantic JSON plus external storage of large payloads in a directory that
    the worker subprocess shares (DAGENT_PAYLOAD_DIR). `model_calls`: how its prompts run model rounds
    (`bench.run --model-calls`)."""
    return Settings(temporal_address=address, task_queue=task_queue or "unused",
                    payload_dir=str(workdir / "payloads"), model_calls=model_calls)


def product_worker_env(address: str, task_queue: str, workdir: Path, *, sandbox: str = "on",
                       tool: str = "", model_calls: ModelCalls = "activity") -> dict[str, str]:
    """What the project's bench worker (`dagent worker` with the bench plugin) runs with, over the environment:
    its server, queue, plugin and scripted model, the stores it shares with the client, its sandbox (`on`, the
    default, or `off`), how the bench tool declares `local` (BENCH_TOOL: "", "local" or "regular") and how its
    prompts run model rounds (DAGENT_MODEL_CALLS, as the client is told)."""
    return {"TEMPORAL_ADDRESS": address, "DAGENT_TASK_QUEUE": task_queue, "DAGENT_PLUGINS": "bench.plugin:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:bench.plugin:model", "DAGENT_FILE_DIR": str(workdir / "files"),
            "DAGENT_PAYLOAD_DIR": product_settings(address, workdir).payload_dir,
            "DAGENT_WORKFLOW_SANDBOX": sandbox, "BENCH_TOOL": tool, "DAGENT_MODEL_CALLS": model_calls}


class ProductSide(Side):
    """The project's worker (`dagent worker`) with its defaults (Temporal's workflow sandbox on, our package
    passed through, like the baseline's runner); `sandbox="off"`: the unsandboxed opt-in."""

    name = PRODUCT

    def __init__(self, client: Client, address: str, workdir: Path, options: dict[str, Any], *,
                 sandbox: str = "on") -> None:
        super().__init__(client, address, workdir, options)
        self.sandbox = sandbox
        if sandbox == "off":
            self.name = PRODUCT_UNSANDBOXED

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "durable_agent.cli", "worker"]

    def worker_env(self) -> dict[str, str]:
        return super().worker_env() | product_worker_env(self.address, self.task_queue, self.workdir,
                                                          sandbox=self.sandbox,
                                                          tool=str(self.options.get("tool") or ""),
                                                          model_calls=self.options.get("model_calls") or "activity")

    @property
    def agent(self) -> AgentClient:
        return AgentClient(self.client, product_settings(self.address, self.workdir, self.task_queue,
                                                         model_calls=self.options.get("model_calls") or "activity"))

    async def start(self, scenario: Scenario) -> Run:
        handle = await self.agent.start(scenario.text(), user_id="bench", max_rounds=scenario.rounds + 1)
        return Run(wf=handle.workflow, scenario=scenario, prompt=handle)

    async def finish(self, run: Run) -> None:
        assert run.prompt is not None
        prompt = await run.prompt.result()
        tools = [o for o in prompt.output if isinstance(o, ToolOutput) and isinstance(o.result, ToolSuccess)]
        if prompt.state != "completed" or prompt.force_completed or len(tools) != run.scenario.rounds:
            raise RuntimeError(f"{run.wf.id}: state={prompt.state} force_completed={prompt.force_completed} "
                               f"tool results={len(tools)}/{run.scenario.rounds} error={prompt.error}")

    async def wait_waiting(self, run: Run) -> str:
        assert run.prompt is not None
        prompt = await run.prompt.wait_until("waiting_for_approval", poll_interval=0.01)
        for entry in prompt.output:
            if isinstance(entry, ToolOutput) and isinstance(entry.result, ApprovalRequest):
                return entry.id
        raise RuntimeError(f"{run.wf.id}: no pending call (state {prompt.state})")

    async def approve(self, run: Run, call_id: str) -> None:
        assert run.prompt is not None
        await run.prompt.approve(call_id, by="bench")

    async def result_visible(self, run: Run, call_id: str) -> bool:
        assert run.prompt is not None
        entry = (await run.prompt.get()).tool_call(call_id)
        return entry is not None and isinstance(entry.result, ToolSuccess)


class BaselineSide(Side):
    name = BASELINE

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "bench.baseline", "--address", self.address, "--task-queue", self.task_queue]

    async def start(self, scenario: Scenario, history: list[Message] | None = None) -> Run:
        """`history`: the earlier turns of a conversation, as the previous turn's workflow returned them."""
        wf = await self.client.start_workflow(
            BASELINE_WORKFLOW, BaselineInput(input=scenario.text(), max_rounds=scenario.rounds + 1,
                                             history=history or []),
            id=f"baseline-{uuid.uuid4().hex[:16]}", task_queue=self.task_queue, result_type=list[Message])
        return Run(wf=wf, scenario=scenario)

    async def finish(self, run: Run) -> None:
        transcript: list[Message] = await run.wf.result()
        results = sum(1 for m in transcript if m.role == "tool_result")
        if results != run.scenario.rounds:
            raise RuntimeError(f"{run.wf.id}: tool results={results}/{run.scenario.rounds}")

    async def _state(self, run: Run) -> BaselineState:
        return await run.wf.query("get_state", result_type=BaselineState)

    async def wait_waiting(self, run: Run) -> str:
        while True:
            state = await self._state(run)
            if state.state == "waiting_for_approval":
                return next(m.call_id for m in reversed(state.transcript) if m.role == "tool_call")
            if state.state == "completed":
                raise RuntimeError(f"{run.wf.id}: completed without waiting")
            await asyncio.sleep(0.01)

    async def approve(self, run: Run, call_id: str) -> None:
        await run.wf.signal("approve", call_id)

    async def result_visible(self, run: Run, call_id: str) -> bool:
        state = await self._state(run)
        return any(m.role == "tool_result" and m.call_id == call_id for m in state.transcript)
