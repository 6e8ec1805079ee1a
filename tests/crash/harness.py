"""Crash harness: run N prompts while SIGKILLing the worker (or the Temporal dev server) at random moments.

    python -m tests.crash.harness --seed 7 --prompts 10 --kills 20 --target worker
    python -m tests.crash.harness --seed 7 --target server --prompts 5 --kills 5
    python -m tests.crash.harness --long                   # soak: bigger runs, several seeds in a row
    scripts/soak                                           # the soak for both targets, with totals

One run, all on a fresh dev server with its own SQLite file under `workdir`:

1. **Reference**: every prompt of the plan (`tests/crash/scenario.py`) runs once without crashes - for the
   worker target on a task queue and worker of its own that are never killed (alongside the crash phase),
   for the server target before the crash phase (a server kill would hit it too).
2. **Crash phase**: the same prompts run again (started a few at a time, so prompts are always in flight)
   while `kills` SIGKILLs land on the workers (`target="worker"`: `pool` workers are kept running and each
   killed one is replaced by a new process; when kills outpace restarts no worker is left and every prompt
   waits for one) or on the dev server (`target="server"`: restarted on the same db file; the worker stays
   up). Each kill aims at a phase drawn from a seeded `random.Random` - any moment, inside a model call,
   inside a tool call, while a prompt waits for approval, or right after a call ended (its result being
   recorded: between calls and rounds) - and where it actually landed is classified afterwards from the
   activity journal (a call started but not ended by the killed pid) and the prompts' last polled states.
   The harness approves or rejects (by signal, as the plan says) every call that waits, after a seeded
   delay; every fourth prompt's round-1 charge is answered with a steer instead (`scenario.steered_call`).
   Kills aimed at a model call, a tool call, an approval wait (decisions are held until a prompt waits) or
   a decision (the worker holding the decided prompt, right after the signal) wait for that state as long
   as a crash prompt runs, so they land where they aim whatever the machine's load.
3. **Settle**: after the last kill the workers stay up, every waiting call is decided at once, and every
   prompt must complete within a deadline.
4. **Checks**: every prompt completed (one unfinished after the settle time is *stuck*); its output array
   equals the reference's (timestamps aside: same entries, same order; duplicates and losses are reported
   separately); usage is exactly `rounds x CALL_USAGE` (a model call counted twice would show); every
   approved charge appears in the ledger exactly once (the tool honours its idempotency key), a rejected
   one never runs. The report also counts re-executions (model calls, charges, lookups) and the timeouts
   found in the prompts' histories.

Seeded: the kill plan (targets, delays, downtimes, victims) and the approval delays come from `--seed`
only, so a failing seed can be re-run. Wall-clock timing still varies, so a replay aims at the same moments
but may land a few milliseconds off.

Stranded model calls (rescued by default; `--no-rescue` turns it off): the model activity has a 5 min
start-to-close timeout (workflows/prompt/round_input.py MODEL_TIMEOUT) and a 30 s heartbeat timeout, so a model call
whose worker was killed - or whose activity task was handed to a live worker in a poll response lost in a server
restart - is retried only after 5 minutes (measured: 304 s for a one-prompt `--no-rescue` run). To keep
runs bounded, a watchdog shortens the start-to-close timeout of such an attempt to 3 s
(UpdateActivityOptions, as an operator could) once its worker is known dead, or once it has been running
for `stuck_after_s` (10 s; a scripted model call takes at most 0.4 s). Every one is listed in the report.

Workers: by default forked from a small fork server (the "zygote", a subprocess that has imported the
worker's modules once) and running the same entry point as `python -m cli worker`: a fresh interpreter
spends 5-8 s importing on a loaded 2-core box, a fork is ready in 1-3 s. The zygote is restarted whenever
project code changed since it started, so it never forks stale code. `--exec` starts real
`python -m cli worker` subprocesses instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.workflowservice.v1 import SignalWorkflowExecutionRequest, UpdateActivityOptionsRequest
from temporalio.service import RPCError

from durable_agent.agent.models import ApprovalRequest, MessageOutput, ToolOutput
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient, DecisionRefused
from durable_agent.workers.settings import Settings
from durable_agent.workflows.names import INVOKE_TOOL_ACTIVITY, MODEL_ROUND_ACTIVITY, STEER_SIGNAL
from durable_agent.workflows.protocol import SteerRequest
from tests.crash import scenario
from tests.crash.constants import (
    APPROVER,
    BETWEEN_WINDOW_S,
    DEFAULT_PACE,
    MAX_TARGETED_RUNS,
    REJECT_REASON,
    REPO_ROOT,
    RESCUE_TIMEOUT,
    SOAK_PACE,
    STATE_TARGET_CAP_S,
    STEER_MESSAGE,
    TARGET_WAIT_S,
    Spawn,
    Target,
)
from tests.crash.journal import Journal, prompt_of
from tests.crash.plan import KillPlan, Tracked, kill_plan, pid_of, quietly, retries_exhausted
from tests.crash.report import HarnessReport, KillRecord
from tests.crash.workers import WorkerProc, Zygote, zygote
from tests.support.jsonl import read_lines
from tests.support.records import shape

# --------------------------------------------------------------------------------------------------
# the harness


class Harness:
    def __init__(self, seed: int, prompts: int, kills: int, target: Target, workdir: Path, *,
                 spawn: Spawn = "fork", rescue: bool = True, settle_s: float = 90.0,
                 stuck_after_s: float = 10.0, pool: int = 3, pace: float = DEFAULT_PACE,
                 cached_waiting: int | None = None, log: Callable[[str], None] | None = None) -> None:
        self.seed, self.prompts, self.kills, self.target = seed, prompts, kills, target
        self.cached_waiting = cached_waiting
        self.workdir = workdir
        self.spawn: Spawn = spawn
        self.rescue = rescue
        self.settle_s = settle_s
        self.stuck_after_s = stuck_after_s
        self.pace = pace
        self.log = log or (lambda message: None)
        self.crash_dir = workdir / "crash"
        self.payload_dir = workdir / "payloads"
        self.crash_dir.mkdir(parents=True, exist_ok=True)
        self.queue = f"crash-{seed}-{os.getpid()}"
        # Worker target: the crash-free reference runs alongside the kills, on a queue whose worker is never
        # killed. Server target: a server kill would hit it too, so it runs first, on the crash queue.
        self.parallel_reference = target == "worker"
        self.reference_queue = f"{self.queue}-ref" if self.parallel_reference else self.queue
        self._reference_client: AgentClient | None = None
        self._forker: Zygote | None = None
        self.server = DevServer(db_file=workdir / "temporal.db", ui_port=None)
        self.journal = Journal(self.crash_dir / scenario.JOURNAL_FILE)
        self.pool_size = max(1, pool) if target == "worker" else 1
        self.report = HarnessReport(seed=seed, target=target, prompts=prompts, kills_planned=kills,
                                    spawn=spawn, rescue=rescue, workdir=str(workdir), pool=self.pool_size,
                                    pace=pace)
        self.tracked: list[Tracked] = []
        self.workers: list[WorkerProc] = []  # every worker started
        self.pool: list[WorkerProc] = []  # the ones not killed
        self._restarts: list[tuple[KillRecord, float, WorkerProc]] = []
        self.killed_pids: set[int] = set()
        self.approve_now = True
        self.hold_decisions = False  # a kill aimed at an approval wait is looking for one
        self._decided = asyncio.Event()  # set each time a decision (or steer) signal was delivered
        self._last_decided: Tracked | None = None
        self._client: AgentClient | None = None
        self._stranded: dict[tuple[str, str, int], dict[str, Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._phase_start = time.monotonic()

    @property
    def client(self) -> AgentClient:
        assert self._client is not None
        return self._client

    # --- processes --------------------------------------------------------------------------------

    def worker_env(self, queue: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGENT_")}  # only what is set here
        env.update({
            "TEMPORAL_ADDRESS": self.server.address,
            "DAGENT_TASK_QUEUE": queue or self.queue,
            "DAGENT_PLUGINS": "tests.crash.scenario:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.crash.scenario:model",
            "DAGENT_MODEL_HIGH": "",
            scenario.CRASH_DIR_ENV: str(self.crash_dir),
            "DAGENT_FILE_DIR": str(self.workdir / "files"),
            "DAGENT_PAYLOAD_DIR": str(self.payload_dir),
            "DAGENT_LOG_LEVEL": "INFO",
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p),
        })
        if self.cached_waiting is not None:
            env["DAGENT_CACHED_WAITING"] = str(self.cached_waiting)
        return env

    async def _ready(self, worker: WorkerProc) -> float:
        seconds = await worker.wait_ready()
        self.report.worker_starts_s.append(round(seconds, 2))
        return seconds

    async def spawn_worker(self) -> WorkerProc:
        """Start a worker process; `ready_task` finishes when it polls."""
        name = f"worker{len(self.workers) + 1}"
        worker = await WorkerProc.start(name, self.worker_env(), self.workdir / f"{name}.log", self._forker)
        worker.ready_task = asyncio.create_task(self._ready(worker))
        self.workers.append(worker)
        self.pool.append(worker)
        return worker

    async def start_reference_worker(self) -> None:
        """A worker of its own for the reference prompts (own task queue), never killed."""
        worker = await WorkerProc.start("reference-worker", self.worker_env(self.reference_queue),
                                        self.workdir / "reference-worker.log", self._forker)
        self.workers.append(worker)
        await worker.wait_ready()

    async def start_worker(self) -> WorkerProc:
        worker = await self.spawn_worker()
        assert worker.ready_task is not None
        await worker.ready_task
        return worker

    def _runs_out(self, pid: int) -> bool:
        """Whether `pid` runs a call that has run more than MAX_TARGETED_RUNS times (a retried call)."""
        self.journal.refresh()
        return any(self.journal.starts[(kind, key)] > MAX_TARGETED_RUNS
                   for _, kind, key in self.journal.in_flight(pid))

    async def _victim(self, pick: float) -> WorkerProc:
        """A ready worker (the `pick` fraction into the start order, sparing workers that run a call already
        interrupted repeatedly when there is a choice); waits for one if none is ready."""
        while True:
            ready = [w for w in self.pool if w.ready_at is not None]
            ready = [w for w in ready if not self._runs_out(w.pid)] or ready
            if ready:
                return ready[min(int(pick * len(ready)), len(ready) - 1)]
            starting = [w.ready_task for w in self.pool if w.ready_task is not None]
            if not starting:
                raise RuntimeError("no worker left to kill")
            done, _ = await asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a worker that failed to start fails the run

    # --- background loops ---------------------------------------------------------------------------

    def _approval_delay(self, t: Tracked, call_id: str) -> float:
        if self.approve_now or t.reference:
            return 0.0
        return random.Random(f"{self.seed}/{t.index}/{call_id}").uniform(0.0, 1.2)

    def _decision_for(self, t: Tracked, call_id: str) -> bool | None:
        for cid, call in scenario.charges(t.index):
            if cid == call_id:
                return call.approve
        return None

    async def _poll(self, t: Tracked) -> None:
        prompt = await quietly(t.handle.get(), 1.0)
        if prompt is None or not t.active:
            return
        t.state = prompt.state
        if self.hold_decisions and not t.reference:
            return
        now = time.monotonic()
        for entry in prompt.output:
            if not (isinstance(entry, ToolOutput) and isinstance(entry.result, ApprovalRequest)):
                continue
            first = t.first_pending.setdefault(entry.id, now)
            if now - t.sent.get(entry.id, -1e9) < 3.0 or now - first < self._approval_delay(t, entry.id):
                continue
            approve = self._decision_for(t, entry.id)
            if approve is None:
                self.report.problems.append(f"{t.handle.id}: unexpected pending call {entry.id} ({entry.tool})")
                approve = False
            try:
                if scenario.steered_call(t.index) == entry.id:  # the steer answers this call: not run
                    await asyncio.wait_for(self._steer(t), 5.0)
                    t.steered = True
                elif approve:
                    await asyncio.wait_for(t.handle.approve(entry.id, by=APPROVER), 5.0)
                else:
                    await asyncio.wait_for(t.handle.reject(entry.id, by=APPROVER, reason=REJECT_REASON), 5.0)
            except (RPCError, DecisionRefused, TimeoutError):
                continue  # not delivered (server down): next round
            t.sent[entry.id] = now
            if not t.reference:
                self._last_decided = t
                self._decided.set()

    async def _steer(self, t: Tracked) -> None:
        """Steer the prompt, exactly once even if a server kill hides whether a first try got through: the
        signal carries a request id of its own, so the server drops a repeat."""
        payloads = await self.client.client.data_converter.encode([SteerRequest(message=STEER_MESSAGE)])
        await self.client.client.workflow_service.signal_workflow_execution(SignalWorkflowExecutionRequest(
            namespace=self.client.settings.namespace, workflow_execution=WorkflowExecution(workflow_id=t.handle.id),
            signal_name=STEER_SIGNAL, input=Payloads(payloads=payloads), identity=APPROVER,
            request_id=f"steer-{t.handle.id}"))

    def _note_errors(self, where: str, results: list[Any]) -> None:
        for result in results:
            if isinstance(result, Exception):
                problem = f"{where}: {type(result).__name__}: {result}"
                if problem not in self.report.problems:
                    self.report.problems.append(problem)

    async def _approver(self) -> None:
        while not self._stop.is_set():
            results = await asyncio.gather(*(self._poll(t) for t in self.tracked if t.active), return_exceptions=True)
            self._note_errors("approver", results)
            await asyncio.sleep(0.15)

    async def _watch(self, t: Tracked) -> None:
        while True:
            try:
                prompt = await t.handle.result()
            except RPCError:
                await asyncio.sleep(0.2)  # server restarting: the long poll resumes
                continue
            except Exception as exc:
                t.error = f"{type(exc).__name__}: {exc}"
                return
            t.result, t.finished, t.state = prompt, time.monotonic(), prompt.state
            return

    async def _check_stuck(self, t: Tracked) -> None:
        description = await quietly(t.handle.workflow.describe(), 2.0)
        if description is None:
            return
        now = time.time()
        for pa in description.raw_description.pending_activities:
            if pa.activity_type.name == MODEL_ROUND_ACTIVITY:
                await self._restore_rescued(t.handle.id, pa.activity_id, pa.attempt)
            if (pa.activity_type.name != MODEL_ROUND_ACTIVITY
                    or pa.state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED):
                continue
            age = now - pa.last_started_time.ToDatetime(tzinfo=UTC).timestamp()
            pid = pid_of(pa.last_worker_identity)
            dead = pid is not None and pid in self.killed_pids
            slot = (t.handle.id, pa.activity_id, pa.attempt)
            if not ((dead and age > 0.5) or age > self.stuck_after_s):
                continue
            record = self._stranded.get(slot)
            if record is None:
                record = {"prompt": t.handle.id, "activity_id": pa.activity_id, "attempt": pa.attempt,
                          "worker": pa.last_worker_identity, "worker_dead": dead, "age_s": round(age, 2),
                          "rescued": False}
                self._stranded[slot] = record
                self.report.model_rescues.append(record)
            if not self.rescue or record["rescued"]:
                continue
            request = UpdateActivityOptionsRequest(
                namespace=self.client.settings.namespace, execution=WorkflowExecution(workflow_id=t.handle.id),
                identity=APPROVER, id=pa.activity_id, activity_options=ActivityOptions(
                    start_to_close_timeout=RESCUE_TIMEOUT), update_mask=FieldMask(paths=["start_to_close_timeout"]))
            try:
                await self.client.client.workflow_service.update_activity_options(request)
                record["rescued"] = True
            except RPCError as exc:
                record["error"] = str(exc)  # server restarting: tried again next round

    async def _restore_rescued(self, prompt_id: str, activity_id: str, attempt: int) -> None:
        """Once a rescued attempt has been retried, give the activity its own timeout back: the short one
        would otherwise also cut off healthy (slow, on a loaded box) later attempts and use up retries."""
        for (pid, aid, rescued_attempt), record in list(self._stranded.items()):
            if (pid, aid) != (prompt_id, activity_id) or rescued_attempt >= attempt:
                continue
            if not record["rescued"] or record.get("restored"):
                continue
            request = UpdateActivityOptionsRequest(
                namespace=self.client.settings.namespace, execution=WorkflowExecution(workflow_id=prompt_id),
                identity=APPROVER, id=activity_id, restore_original=True)
            try:
                await self.client.client.workflow_service.update_activity_options(request)
                record["restored"] = True
            except RPCError as exc:
                record["restore_error"] = str(exc)

    async def _watchdog(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(1.0)
            results = await asyncio.gather(*(self._check_stuck(t) for t in self.tracked if t.active),
                                           return_exceptions=True)
            self._note_errors("watchdog", results)

    # --- prompts ----------------------------------------------------------------------------------

    async def start_prompt(self, index: int, *, reference: bool) -> Tracked:
        prompt_id = f"{'ref' if reference else 'crash'}-s{self.seed}-{index}"
        client = self._reference_client if reference and self._reference_client else self.client
        handle = await client.start(scenario.prompt_input(index), user_id="crash-harness", prompt_id=prompt_id)
        t = Tracked(index=index, handle=handle, reference=reference, started=time.monotonic())
        self.tracked.append(t)
        t.task = asyncio.create_task(self._watch(t))
        self._tasks.append(t.task)
        return t

    async def wait_all(self, tracked: list[Tracked], seconds: float, what: str) -> None:
        watching = [t.task for t in tracked if t.task is not None and t.active]
        if watching:
            await asyncio.wait(watching, timeout=seconds)
        stuck = [t for t in tracked if t.active]
        for t in stuck:
            pending = "?"
            description = await quietly(t.handle.workflow.describe(), 5.0)
            if description is not None:
                pending = ", ".join(f"{pa.activity_type.name}#{pa.attempt} "
                                    f"{PendingActivityState.Name(pa.state)} {pa.last_worker_identity}"
                                    for pa in description.raw_description.pending_activities) or "none"
            self.report.problems.append(f"{what}: {t.handle.id} did not finish within {seconds:.0f} s "
                                        f"(last state {t.state}; pending activities: {pending})")
            if not t.reference:
                self.report.stuck.append(t.handle.id)
        for t in tracked:
            if t.error:
                self.report.problems.append(f"{what}: {t.handle.id}: {t.error}")

    # --- kills ------------------------------------------------------------------------------------

    def _phase_seen(self, target: str, since: float, pid: int | None) -> bool:
        self.journal.refresh()
        # Only calls on their first run(s) count as a target (see MAX_TARGETED_RUNS).
        flying = [slot for slot in self.journal.in_flight(pid)
                  if self.journal.starts[(slot[1], slot[2])] <= MAX_TARGETED_RUNS]
        if target == "model":
            return any(kind == "model" for _, kind, _ in flying)
        if target == "tool":
            return any(kind != "model" for _, kind, _ in flying)
        if target == "approval":
            return any(t.active and not t.reference and t.state == "waiting_for_approval" for t in self.tracked)
        if target == "between":
            ends = [v for p, v in self.journal.last_end.items() if pid is None or p == pid]
            return bool(ends) and max(ends) > since and time.time() - max(ends) < 0.03
        return True

    def _crash_prompts_running(self) -> bool:
        return any(t.active and not t.reference for t in self.tracked)

    async def _wait_for_state(self, target: str) -> tuple[bool, WorkerProc | None]:
        """Wait for a crash prompt waiting for approval (decisions held meanwhile), or for a decision signal
        just delivered (the victim: the worker that ran that prompt's last workflow task, which holds it in
        its cache and gets the signal's task); as long as any crash prompt runs."""
        cap = time.monotonic() + STATE_TARGET_CAP_S
        self._decided.clear()
        self.hold_decisions = target == "approval"  # released by kill_once once the kill has landed
        while self._crash_prompts_running() and time.monotonic() < cap:
            if target == "approval" and self._phase_seen("approval", 0.0, None):
                return True, None
            if target == "decision" and self._decided.is_set() and self._last_decided is not None:
                return True, await self._sticky_worker(self._last_decided)
            try:
                await asyncio.wait_for(self._decided.wait(), 0.05)
            except TimeoutError:
                pass
        return False, None

    async def _sticky_worker(self, t: Tracked) -> WorkerProc | None:
        if self.target != "worker":
            return None
        history = await quietly(t.handle.workflow.fetch_history(), 2.0)
        identity = next((e.workflow_task_completed_event_attributes.identity for e in reversed(history.events)
                         if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), "") if history else ""
        pid = pid_of(identity)
        return next((w for w in self.pool if w.pid == pid and w.ready_at is not None), None)

    def _classify(self, number: int, plan: KillPlan, seen: bool, pid: int | None, killed_at: float,
                  flying: list[tuple[int, str, str]]) -> KillRecord:
        """Where a kill landed: calls in flight (journal), a call that had just ended (its result was being
        recorded: between calls/rounds), prompts waiting for approval (last polled state)."""
        crash = [t for t in self.tracked if not t.reference and t.active]
        busy = {prompt_of(key) for _, _, key in flying}
        waiting = [t for t in crash if t.state == "waiting_for_approval"]
        running = [t for t in crash if t.state != "waiting_for_approval" and t.handle.id not in busy]
        ends = [end for p, end in self.journal.last_end.items() if pid is None or p == pid]
        wall = time.time() - (time.monotonic() - killed_at)
        phases: list[str] = []
        if any(kind == "model" for _, kind, _ in flying):
            phases.append("model")
        if any(kind != "model" for _, kind, _ in flying):
            phases.append("tool")
        if ends and 0 <= wall - max(ends) < BETWEEN_WINDOW_S:
            phases.append("between")
        if waiting:
            phases.append("approval")
        if plan.target == "decision" and seen:
            phases.append("decision")  # right after a decision signal was delivered, before its task ran
        if not phases:
            phases.append("other")
        return KillRecord(number=number, target=plan.target, target_seen=seen, phases=phases,
                          at_s=round(killed_at - self._phase_start, 2), pid=pid,
                          in_flight=[f"{kind} {key}" for _, kind, key in flying], waiting=len(waiting),
                          running=len(running), restart_s=0.0,
                          workers_left=sum(w.ready_at is not None for w in self.pool))

    async def kill_once(self, number: int, plan: KillPlan) -> KillRecord:
        if plan.refill and self.target == "worker":  # at most one worker still starting
            while sum(w.ready_at is None for w in self.pool) > 1:
                starting = [w.ready_task for w in self.pool if w.ready_task is not None and w.ready_at is None]
                await asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(plan.delay)
        victim = await self._victim(plan.pick) if self.target == "worker" else None
        since = time.time()
        seen = plan.target == "any"
        if plan.target in ("approval", "decision"):
            seen, found = await self._wait_for_state(plan.target)
            victim = found or victim
        deadline = time.monotonic() + TARGET_WAIT_S
        cap = time.monotonic() + STATE_TARGET_CAP_S

        def looking() -> bool:  # model/tool: a call of a running crash prompt will be in flight eventually
            if plan.target in ("approval", "decision"):
                return False
            if plan.target in ("model", "tool"):
                return self._crash_prompts_running() and time.monotonic() < cap
            return time.monotonic() < deadline

        while not seen and looking():
            if victim is None:  # not about one worker
                seen = self._phase_seen(plan.target, since, None)
            else:  # the first ready worker seen in the target phase is the victim
                ready = [w for w in self.pool if w.ready_at is not None]
                found = next((w for w in ready if not self._runs_out(w.pid)
                              and self._phase_seen(plan.target, since, w.pid)), None)
                seen, victim = found is not None, found or victim
            if not seen:
                await asyncio.sleep(0.005)
        if seen and plan.target in ("model", "tool", "approval"):
            await asyncio.sleep(plan.offset)
        if victim is not None:
            killed_at = await victim.kill()
            self.killed_pids.add(victim.pid)
            self.pool.remove(victim)
            self.journal.refresh()  # the victim is dead: its open calls were interrupted by the kill
            record = self._classify(number, plan, seen, victim.pid, killed_at, self.journal.in_flight(victim.pid))
            self.hold_decisions = False
            await asyncio.sleep(plan.downtime)
            self._restarts.append((record, killed_at, await self.spawn_worker()))
        else:
            self.journal.refresh()
            flying = self.journal.in_flight()
            killed_at = time.monotonic()
            await asyncio.to_thread(self.server.kill)
            record = self._classify(number, plan, seen, None, killed_at, flying)
            self.hold_decisions = False
            await asyncio.sleep(plan.downtime)
            await asyncio.to_thread(self.server.start)
            record.restart_s = round(time.monotonic() - killed_at, 2)
            for worker in list(self.pool):
                if not worker.alive():
                    self.report.problems.append(f"kill {number}: {worker.name} died with the server:\n"
                                                f"{worker.tail()}")
                    self.pool.remove(worker)
                    await self.start_worker()
        self.report.kills.append(record)
        self.log(f"kill {number}: aim {plan.target} landed {'+'.join(record.phases)} {record.in_flight}")
        return record

    # --- the run ----------------------------------------------------------------------------------

    async def run(self) -> HarnessReport:
        started = time.monotonic()
        try:
            if self.spawn == "fork":  # one zygote for the whole run (it starts importing now, with the server)
                self._forker = await asyncio.to_thread(zygote)
            await self.server.start_async()
            self._client = await AgentClient.connect(Settings(
                temporal_address=self.server.address, task_queue=self.queue, payload_dir=str(self.payload_dir)))
            self._reference_client = AgentClient(self.client.client, self.client.settings.model_copy(
                update={"task_queue": self.reference_queue}))
            self.report.timings["setup"] = time.monotonic() - started
            starting = [self.start_worker() for _ in range(self.pool_size)]
            if self.parallel_reference:
                starting.append(self.start_reference_worker())
            await asyncio.gather(*starting)
            self.report.timings["workers"] = time.monotonic() - started - self.report.timings["setup"]
            self._tasks += [asyncio.create_task(self._approver()), asyncio.create_task(self._watchdog())]

            mark = time.monotonic()
            reference = [await self.start_prompt(i, reference=True) for i in range(self.prompts)]
            if not self.parallel_reference:
                await self.wait_all(reference, 60.0, "reference run")
                self.report.timings["reference"] = time.monotonic() - mark
                if self.report.problems:
                    return self.report

            self.approve_now = False
            self._phase_start = mark = time.monotonic()
            crash: list[Tracked] = []
            slots = [i * self.kills // self.prompts for i in range(self.prompts)] if self.prompts else []
            for number, plan in enumerate(kill_plan(self.seed, self.kills, self.target, self.pace)):
                for index in [i for i, slot in enumerate(slots) if slot == number]:
                    crash.append(await self.start_prompt(index, reference=False))
                await self.kill_once(number + 1, plan)
            for index in range(len(crash), self.prompts):
                crash.append(await self.start_prompt(index, reference=False))
            self.report.timings["kills"] = time.monotonic() - mark
            await asyncio.gather(*(w.ready_task for w in self.pool if w.ready_task is not None))  # all up
            for record, killed_at, replacement in self._restarts:
                if replacement.ready_at is not None:
                    record.restart_s = round(replacement.ready_at - killed_at, 2)

            mark = time.monotonic()
            self.approve_now, self.hold_decisions = True, False
            await self.wait_all(crash, self.settle_s, "crash run")
            self.report.timings["settle"] = time.monotonic() - mark
            if self.parallel_reference:
                await self.wait_all(reference, 60.0, "reference run")
            if any(t.result is None for t in reference):
                return self.report
            mark = time.monotonic()
            await self.check(reference, crash)
            self.report.timings["checks"] = time.monotonic() - mark
        except Exception as exc:  # a worker that would not start, a server that would not come back, ...
            self.report.problems.append(f"harness aborted: {type(exc).__name__}: {exc}")
        finally:
            self._stop.set()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for worker in self.workers:
                await worker.kill()
                if worker.ready_task is not None and not worker.ready_task.done():
                    worker.ready_task.cancel()
            await asyncio.gather(*(w.ready_task for w in self.workers if w.ready_task), return_exceptions=True)
            await asyncio.to_thread(self.server.kill)
            self.report.timings["total"] = time.monotonic() - started
            (self.workdir / "report.json").write_text(self.report.to_json())
        return self.report

    # --- checks -----------------------------------------------------------------------------------

    async def check(self, reference: list[Tracked], crash: list[Tracked]) -> None:
        report = self.report
        ledger = read_lines(self.crash_dir / scenario.LEDGER_FILE)
        effects = Counter(_call_key(line["key"]) for line in ledger if line["kind"] == "charge")
        attempts = Counter(_call_key(line["key"]) for line in ledger if line["kind"] == "charge.attempt")
        lookups = Counter(_call_key(line["key"]) for line in ledger if line["kind"] == "lookup")
        self.journal.refresh()
        expected_keys: set[str] = set()

        for ref in reference:  # the reference itself must have run the plan
            assert ref.result is not None
            calls = sum(len(calls) for calls in scenario.plan_for(ref.index))
            tools = [e for e in ref.result.output if isinstance(e, ToolOutput)]
            last = ref.result.output[-1] if ref.result.output else None
            if (ref.result.state != "completed" or len(tools) != calls
                    or f"Done #{ref.index} " not in str(getattr(last, "text", ""))):
                report.problems.append(f"reference {ref.handle.id}: state {ref.result.state}, {len(tools)} tool "
                                       f"calls (expected {calls}), last entry {last!r:.200}")

        for t in crash:
            ref = reference[t.index].result
            got = t.result
            assert ref is not None
            name = t.handle.id
            exhausted = retries_exhausted(got) if got is not None else None
            for cid, call in scenario.charges(t.index):
                for prompt in (ref, got):
                    if prompt is None:
                        continue
                    key = f"{prompt.id}/{cid}"
                    expected_keys.add(key)
                    if prompt is got and exhausted and call.approve and effects[key] <= 1:
                        continue  # a call cut short by exhausted retries may or may not have taken effect
                    if call.approve and effects[key] != 1:
                        what = "duplicated" if effects[key] > 1 else "lost"
                        entry = prompt.tool_call(cid)
                        result = entry.result.model_dump_json() if entry and entry.result else "none"
                        report.ledger_problems.append(f"{key}: approved charge has {effects[key]} effects "
                                                      f"({what}; {attempts[key]} executions; result {result})")
                    if not call.approve and (effects[key] or attempts[key]):
                        report.ledger_problems.append(f"{key}: rejected charge ran ({attempts[key]} executions, "
                                                      f"{effects[key]} effects)")
                if call.approve:
                    report.charges_approved += 1
                    report.charge_attempts += attempts[f"{name}/{cid}"]
                else:
                    report.charges_rejected += 1
            if got is None:
                report.losses.append(f"{name}: the prompt did not complete (state {t.state})")
                continue
            if exhausted:
                # Every attempt of a call was lost to kills: the prompt took the product's defined outcome (a
                # failed tool call, or a failed prompt for the model call). Not a duplicate or loss, but not
                # the crash-free output either: the kills outran the retry budget.
                report.exhausted.append(f"{name}: {exhausted}")
                continue
            if got.state != "completed" or got.force_completed or got.error:
                report.problems.append(f"{name}: state {got.state}, force_completed {got.force_completed}, "
                                       f"error {got.error}")
            else:
                report.completed += 1
                if t.finished is not None:
                    report.prompt_seconds.append(round(t.finished - t.started, 2))
            self._compare(name, shape(ref), shape(got))
            if scenario.steered_call(t.index) is not None:
                steers = [sum(isinstance(o, MessageOutput) and o.source == "steer" for o in prompt.output)
                          for prompt in (ref, got)]
                if steers == [1, 1]:
                    report.steers += 1
                else:
                    report.problems.append(f"{name}: steer messages (crash-free run, this run): {steers}")
            want = scenario.expected_usage(t.index)
            if got.usage != want or got.usage != ref.usage or got.rounds != scenario.expected_rounds(t.index):
                report.usage_problems.append(f"{name}: usage {got.usage!r}, rounds {got.rounds}; expected {want!r}, "
                                             f"rounds {scenario.expected_rounds(t.index)}")
            runs = sum(n for (kind, key), n in self.journal.starts.items()
                       if kind == "model" and prompt_of(key) == name)
            report.model_calls_rerun += max(0, runs - got.rounds)
            report.lookups_rerun += sum(n - 1 for key, n in lookups.items() if prompt_of(key) == name and n > 1)

        stray = sorted(key for key in set(effects) | set(attempts) if key not in expected_keys)
        report.ledger_problems.extend(f"{key}: a charge no prompt asked for" for key in stray)
        await self._count_stalls(crash)

    def _compare(self, name: str, want: list[Any], got: list[Any]) -> None:
        """Entries are matched by identity (a tool call by its id, other entries by type and ordinal):
        an extra identity is a duplicate, a missing one a loss, the same one with other content a change."""
        if want == got:
            return

        def identities(entries: list[Any]) -> list[tuple[str, str]]:
            seen: Counter[str] = Counter()
            out = []
            for entry in entries:
                kind = str(entry.get("type"))
                if kind == "tool":
                    out.append((kind, str(entry.get("id"))))
                else:
                    seen[kind] += 1
                    out.append((kind, f"#{seen[kind]}"))
            return out

        want_ids, got_ids = identities(want), identities(got)
        extra = Counter(got_ids) - Counter(want_ids)
        missing = Counter(want_ids) - Counter(got_ids)
        by_id = dict(zip(want_ids, want, strict=True))
        for identity, n in extra.items():
            entry = json.dumps(got[got_ids.index(identity)], sort_keys=True)
            self.report.duplicates.append(f"{name}: {identity} appears {n} more time(s): {entry[:300]}")
        for identity, n in missing.items():
            entry = json.dumps(by_id[identity], sort_keys=True)
            self.report.losses.append(f"{name}: {identity} missing {n} time(s): {entry[:300]}")
        for identity, entry in zip(got_ids, got, strict=True):
            if identity in by_id and entry != by_id[identity]:
                self.report.mismatches.append(f"{name}: {identity} differs: got {json.dumps(entry)[:300]}; "
                                              f"crash-free run: {json.dumps(by_id[identity])[:300]}")
        common = [i for i in got_ids if i in by_id]
        if common != [i for i in want_ids if i in set(got_ids)]:
            self.report.mismatches.append(f"{name}: entries in another order: {common}")

    async def _count_stalls(self, crash: list[Tracked]) -> None:
        stalls: Counter[str] = Counter()
        for t in crash:
            history = await quietly(t.handle.workflow.fetch_history(), 10.0)
            if history is None:
                continue
            types: dict[int, str] = {}
            for event in history.events:
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    types[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                    kind = TimeoutType.Name(event.workflow_task_timed_out_event_attributes.timeout_type)
                    stalls[f"workflow task {kind.removeprefix('TIMEOUT_TYPE_').lower()}"] += 1
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    stalls["workflow task failed"] += 1
                elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    attrs = event.activity_task_started_event_attributes
                    name = {MODEL_ROUND_ACTIVITY: "model", INVOKE_TOOL_ACTIVITY: "tool"}.get(
                        types.get(attrs.scheduled_event_id, ""), "other")
                    if attrs.attempt > 1:
                        stalls[f"{name} activity retried (attempt>1 completed)"] += 1
                    # How close a call came to running out of attempts (model: 8; tool: its max_attempts + 2).
                    key = f"{name} activity highest attempt"
                    stalls[key] = max(stalls[key], attrs.attempt)
        self.report.stalls = dict(sorted(stalls.items()))


async def run_harness_async(seed: int, prompts: int, kills: int, target: Target, workdir: Path,
                            **options: Any) -> HarnessReport:
    return await Harness(seed, prompts, kills, target, workdir, **options).run()


def run_harness(seed: int, prompts: int, kills: int, target: Target, workdir: Path,
                **options: Any) -> HarnessReport:
    """One seeded run (see the module docstring). Options: spawn ("fork"|"exec"), rescue, settle_s, log."""
    return asyncio.run(run_harness_async(seed, prompts, kills, target, workdir, **options))


# --------------------------------------------------------------------------------------------------
# command line


def _call_key(key: str) -> str:
    """`<prompt>/<call>` of an idempotency key (`<prompt>/<run>/<call>`): each prompt id is started once here, so the
    run id adds nothing to tell calls apart."""
    return f"{key.split('/', 1)[0]}/{key.rsplit('/', 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.harness", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=None, help="default 10 (worker) / 5 (server); --long 40")
    parser.add_argument("--kills", type=int, default=None, help="default 20 (worker) / 5 (server); --long 100/25")
    parser.add_argument("--target", choices=["worker", "server"], default="worker")
    parser.add_argument("--long", action="store_true",
                        help=f"soak: 40 prompts, 100 (server: 25) kills, 5 runs, --pace {SOAK_PACE:g}")
    parser.add_argument("--pace", type=float, default=None,
                        help=f"longest random delay between kills, s (default {DEFAULT_PACE:g}; --long {SOAK_PACE:g})")
    parser.add_argument("--runs", type=int, default=None, help="runs with seeds seed, seed+1, ... (--long: 5)")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temp directory")
    parser.add_argument("--exec", dest="spawn", action="store_const", const="exec", default="fork",
                        help="start workers as `python -m cli worker` (slower) instead of forking")
    parser.add_argument("--no-rescue", dest="rescue", action="store_false",
                        help="do not shorten the 5 min timeout of model calls killed with their worker")
    parser.add_argument("--pool", type=int, default=3,
                        help="worker target: workers kept running (1: every kill is a full outage until the "
                             "restarted worker is ready)")
    parser.add_argument("--settle", type=float, default=None, help="seconds allowed after the last kill")
    parser.add_argument("--cached-waiting", type=int, default=None,
                        help="the workers' DAGENT_CACHED_WAITING (0: every prompt leaves the cache once it waits)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every kill as it happens")
    args = parser.parse_args(argv)
    server = args.target == "server"
    prompts = args.prompts if args.prompts is not None else (40 if args.long else 5 if server else 10)
    kills = args.kills if args.kills is not None else (
        (25 if server else 100) if args.long else (5 if server else 20))
    runs = args.runs if args.runs is not None else (5 if args.long else 1)
    pace = args.pace if args.pace is not None else (SOAK_PACE if args.long else DEFAULT_PACE)
    settle = args.settle if args.settle is not None else (400.0 if not args.rescue else 180.0 if args.long else 90.0)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="dagent-crash-"))
    failures = 0
    totals: Counter[str] = Counter()
    for run in range(runs):
        seed = args.seed + run
        workdir = base / f"{args.target}-seed{seed}" if runs > 1 or args.workdir is None else base
        report = run_harness(seed, prompts, kills, args.target, workdir, spawn=args.spawn, rescue=args.rescue,
                             settle_s=settle, pool=args.pool, pace=pace, cached_waiting=args.cached_waiting,
                             log=print if args.verbose else None)
        print(report.summary(), flush=True)
        print(f"  report: {workdir / 'report.json'}", flush=True)
        failures += not report.ok
        totals.update(prompts=report.prompts, kills=report.kills_done, lost=report.lost_outputs,
                      duplicated=report.duplicated_effects, stuck=report.stuck_prompts)
    if runs > 1:
        print(f"{runs - failures}/{runs} runs OK", flush=True)
    print(f"soak totals [{args.target}]: {runs} runs, {totals['prompts']} prompts, {totals['kills']} kills: "
          f"lost outputs {totals['lost']}, duplicated side effects {totals['duplicated']}, "
          f"stuck prompts {totals['stuck']}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    from tests.crash import harness as _module  # one copy of the module (and of its zygote), not two

    code = _module.main()
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: the Temporal SDK can crash there (sdk-python#300)
