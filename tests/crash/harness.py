"""Crash harness: run N prompts while SIGKILLing the worker (or the Temporal dev server) at random moments.

    python -m tests.crash.harness --seed 7 --prompts 10 --kills 20 --target worker
    python -m tests.crash.harness --seed 7 --target server --prompts 5 --kills 5
    python -m tests.crash.harness --long                   # soak: bigger runs, several seeds in a row

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
   delay.
3. **Settle**: after the last kill the workers stay up, every waiting call is decided at once, and every
   prompt must complete within a deadline.
4. **Checks**: every prompt completed; its output array equals the reference's (timestamps aside: same
   entries, same order; duplicates and losses are reported separately); usage is exactly
   `rounds x CALL_USAGE` (a model call counted twice would show); every approved charge appears in the
   ledger exactly once (the tool honours its idempotency key), a rejected one never runs. The report also
   counts re-executions (model calls, charges, lookups) and the timeouts found in the prompts' histories.

Seeded: the kill plan (targets, delays, downtimes, victims) and the approval delays come from `--seed`
only, so a failing seed can be re-run. Wall-clock timing still varies, so a replay aims at the same moments
but may land a few milliseconds off.

Stranded model calls (rescued by default; `--no-rescue` turns it off): the model activity has a 5 min
start-to-close timeout and no heartbeat (workflows/prompt.py MODEL_TIMEOUT), so a model call whose worker
was killed - or whose activity task was handed to a live worker in a poll response lost in a server
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
import atexit
import contextlib
import importlib
import json
import os
import queue
import random
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any, Literal

from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.workflowservice.v1 import UpdateActivityOptionsRequest
from temporalio.service import RPCError

from agent.models import Prompt, ToolOutput, ToolPending
from client import AgentClient, DecisionRefused, PromptHandle
from tests.crash import scenario
from tests.support.jsonl import read_lines
from workers.devserver import DevServer
from workers.settings import Settings
from workflows.names import INVOKE_TOOL_ACTIVITY, MODEL_ROUND_ACTIVITY

Target = Literal["worker", "server"]
Spawn = Literal["fork", "exec"]

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_MARKER = "worker on "
VOLATILE_KEYS = frozenset({"started_at", "finished_at", "requested_at", "expires_at", "at"})
TARGETS = ("any", "model", "tool", "approval", "between")
PHASE_ORDER = ("model", "tool", "between", "approval", "other")
# Share of kills that first wait until at most one worker is still starting; the others may follow each other
# faster than workers restart (down to a full outage). Without this pacing, in a 100-kill run on a loaded
# box workers spent more time starting than working, and calls ran out of retry attempts.
REFILL_SHARE = 0.3
DEFAULT_PACE = 0.4  # the longest delay before a kill starts looking for its target (CI: a dense burst)
SOAK_PACE = 2.0  # --long: kills spread out, so the run measures durability rather than retry budgets
TARGET_WAIT_S = 1.0  # how long a kill waits for its target phase before it strikes anyway
# Kills aim only at a call's first run, and spare (when there is a choice) workers running a retried call:
# every kill of a call uses up one of its attempts (model: 8; tools: max_attempts + 2), and hitting the same
# retried call again and again tests the retry budget, not durability. Unseen attempts (handed to a worker
# that dies before it runs them) still count; the report lists the highest attempt reached.
MAX_TARGETED_RUNS = 1
BETWEEN_WINDOW_S = 0.15  # a kill this soon after a call ended lands while its result is being recorded
APPROVER = "crash-harness"
REJECT_REASON = "declined by the crash harness"
RESCUE_TIMEOUT = Duration(seconds=3)
ZYGOTE_PRELOAD = ["cli.app", "workers.worker", "tests.crash.scenario"]
SOURCE_DIRS = ("agent", "activities", "workflows", "workers", "plugins", "tests/crash")


# --------------------------------------------------------------------------------------------------
# the report


@dataclass
class KillRecord:
    number: int
    target: str  # the phase the kill aimed at
    target_seen: bool  # whether that phase was observed before the kill (else: killed at the deadline)
    phases: list[str]  # where it landed (may be several: one prompt in a model call, another waiting)
    at_s: float  # seconds since the crash phase began
    pid: int | None  # the killed worker (worker target)
    in_flight: list[str]  # calls started but not ended when the kill landed
    waiting: int  # prompts waiting for approval
    running: int  # prompts running with no call in flight (workflow task, scheduling, retry wait)
    restart_s: float  # kill -> replacement ready (worker started / server healthy)
    workers_left: int  # ready workers still up right after the kill (0: every prompt stalls until a restart)


@dataclass
class HarnessReport:
    seed: int
    target: str
    prompts: int
    kills_planned: int
    spawn: str
    rescue: bool
    workdir: str
    pool: int = 1
    pace: float = DEFAULT_PACE
    kills: list[KillRecord] = field(default_factory=list)
    completed: int = 0
    duplicates: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)  # calls that ran out of retry attempts (see check)
    usage_problems: list[str] = field(default_factory=list)
    ledger_problems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    charges_approved: int = 0
    charges_rejected: int = 0
    charge_attempts: int = 0  # executions of approved charges (retries after kills included)
    lookups_rerun: int = 0  # lookup executions beyond one per call (at-least-once, expected)
    model_calls_rerun: int = 0  # model executions beyond one per round (their usage must not count)
    model_rescues: list[dict[str, Any]] = field(default_factory=list)
    stalls: dict[str, int] = field(default_factory=dict)  # timeouts found in the crash prompts' histories
    worker_starts_s: list[float] = field(default_factory=list)
    prompt_seconds: list[float] = field(default_factory=list)  # start -> completed, crash phase
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def kills_done(self) -> int:
        return len(self.kills)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.losses or self.mismatches or self.exhausted or self.usage_problems
                    or self.ledger_problems or self.problems) and self.completed == self.prompts

    def phase_counts(self) -> dict[str, int]:
        counts = Counter(phase for kill in self.kills for phase in kill.phases)
        return {phase: counts.get(phase, 0) for phase in PHASE_ORDER}

    def replay_command(self) -> str:
        extra = (" --exec" if self.spawn == "exec" else "") + ("" if self.rescue else " --no-rescue")
        extra += f" --pool {self.pool}" if self.target == "worker" else ""
        extra += f" --pace {self.pace:g}" if self.pace != DEFAULT_PACE else ""
        return (f"python -m tests.crash.harness --seed {self.seed} --prompts {self.prompts} "
                f"--kills {self.kills_planned} --target {self.target}{extra}")

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        phases = ", ".join(f"{k} {v}" for k, v in self.phase_counts().items())
        targets = Counter(f"{k.target}{'' if k.target_seen else '(missed)'}" for k in self.kills)
        lines = [
            f"crash harness [{verdict}] target={self.target} seed={self.seed} prompts={self.prompts} "
            f"kills={self.kills_done}/{self.kills_planned} workers={self.pool} spawn={self.spawn} rescue={self.rescue}",
            f"  completed {self.completed}/{self.prompts}; duplicates {len(self.duplicates)}, losses "
            f"{len(self.losses)}, other output mismatches {len(self.mismatches)}, retries exhausted "
            f"{len(self.exhausted)}, usage problems "
            f"{len(self.usage_problems)}, ledger problems {len(self.ledger_problems)}, other {len(self.problems)}",
            f"  kills landed (a kill may count in several): {phases}",
            f"  kill targets: {dict(sorted(targets.items()))}",
            f"  charges approved {self.charges_approved} (executions incl. retries {self.charge_attempts}, "
            f"effects exactly once each), rejected {self.charges_rejected} (never run); lookups re-run "
            f"{self.lookups_rerun}; model calls re-run {self.model_calls_rerun} (usage counted once)",
            f"  model calls stranded (attempt started on a killed worker, or lost in a server restart; each "
            f"waits out the 5 min start-to-close timeout unless rescued): {len(self.model_rescues)}, rescued "
            f"{sum(bool(r['rescued']) for r in self.model_rescues)}",
            f"  timeouts in the crash prompts' histories: {self.stalls}",
        ]
        if self.worker_starts_s:
            starts = self.worker_starts_s
            lines.append(f"  worker starts: {len(starts)}, ready in {min(starts):.2f}-{max(starts):.2f} s "
                         f"(mean {sum(starts) / len(starts):.2f})")
        if self.prompt_seconds:
            secs = sorted(self.prompt_seconds)
            lines.append(f"  crash-phase prompt durations: median {secs[len(secs) // 2]:.1f} s, "
                         f"max {secs[-1]:.1f} s")
        lines.append("  timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items()))
        for kill in self.kills:
            lines.append(f"    kill {kill.number:>3} @{kill.at_s:6.2f}s aim={kill.target:<8} "
                         f"landed={'+'.join(kill.phases):<24} restart {kill.restart_s:.2f} s "
                         f"left={kill.workers_left} "
                         f"in-flight={kill.in_flight}")
        for title, items in [("DUPLICATES", self.duplicates), ("LOSSES", self.losses),
                             ("MISMATCHES", self.mismatches), ("EXHAUSTED", self.exhausted),
                             ("USAGE", self.usage_problems),
                             ("LEDGER", self.ledger_problems), ("PROBLEMS", self.problems)]:
            lines.extend(f"  {title}: {item}" for item in items)
        if not self.ok:
            lines.append(f"  replay: {self.replay_command()}  (workdir {self.workdir})")
        return "\n".join(lines)

    def to_json(self) -> str:
        data = asdict(self)
        data["ok"] = self.ok
        data["phase_counts"] = self.phase_counts()
        return json.dumps(data, indent=2, default=str)


# --------------------------------------------------------------------------------------------------
# worker processes


def _zygote_child(command: dict[str, Any]) -> None:  # pragma: no cover - runs in a forked child
    """A forked worker: exactly what `python -m cli worker` runs, its output into the log file."""
    try:
        fd = os.open(command["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(command["env"])
        sys.argv = list(command["argv"])
        from cli.app import app

        app()
    finally:
        os._exit(70)  # `app()` leaves with os._exit itself; getting here means it raised


def zygote_main() -> None:  # pragma: no cover - runs in the zygote process
    """The fork server: import the worker's modules once, then fork a worker per command line on stdin.

    stdin: one JSON object per line (`env`, `log`, `argv`). stdout: `{"ready": true}` once imported, then
    `{"pid": N}` per fork (in order) and `{"exit": N, "code": C}` when a child ends. EOF on stdin kills the
    children that are left and ends the zygote. Single-threaded, so forking is safe.
    """
    for name in ZYGOTE_PRELOAD:
        importlib.import_module(name)

    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    send({"ready": True})
    children: set[int] = set()
    buffer = b""
    stdin = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.01)
        if readable:
            data = os.read(stdin, 65536)
            if not data:
                break
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    _zygote_child(json.loads(line))
                children.add(pid)
                send({"pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _source_mtime() -> float:
    return max((f.stat().st_mtime for d in SOURCE_DIRS for f in (REPO_ROOT / d).rglob("*.py")), default=0.0)


class Zygote:
    """Client side of `zygote_main`: a subprocess with a reader thread (usable from any event loop)."""

    def __init__(self) -> None:
        self.started = time.time()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
        self.proc = subprocess.Popen([sys.executable, "-c", "from tests.crash.harness import zygote_main; "
                                      "zygote_main()"], cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.ready = threading.Event()
        self._pids: queue.Queue[int] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, name="zygote-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            message = json.loads(raw)
            if "ready" in message:
                self.ready.set()
            elif "pid" in message:
                self._pids.put(int(message["pid"]))
            elif "exit" in message:
                with self._lock:
                    self._exits[int(message["exit"])] = int(message["code"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, env: dict[str, str], log_path: Path, argv: list[str]) -> int:
        """Fork a child (blocking: call in a thread); waits for the preload on first use."""
        if not self.ready.wait(180):
            raise RuntimeError("the worker fork server did not finish importing within 180 s")
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write((json.dumps({"env": env, "log": str(log_path), "argv": argv}) + "\n").encode())
            self.proc.stdin.flush()
            return self._pids.get(timeout=30)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            code = self._exits.get(pid)
        if code is None and not self.alive():  # the zygote is gone (it kills its children as it ends)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return -signal.SIGKILL
        return code

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_zygote: Zygote | None = None


def zygote() -> Zygote:
    """The fork server, shared by runs in this process; restarted when project code changed since it started
    (it must never fork a stale copy of the code)."""
    global _zygote
    if _zygote is not None and (not _zygote.alive() or _source_mtime() > _zygote.started):
        _zygote.close()
        _zygote = None
    if _zygote is None:
        _zygote = Zygote()
        atexit.register(_zygote.close)
    return _zygote


def _exec_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "cli", "worker"], env=env, cwd=REPO_ROOT,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


class WorkerProc:
    """One worker process: forked by the zygote, or exec'd as `python -m cli worker`."""

    def __init__(self, name: str, log_path: Path, pid: int, *, popen: subprocess.Popen[bytes] | None = None,
                 forked_by: Zygote | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self.pid = pid
        self.started = time.monotonic()
        self.ready_s: float | None = None
        self.ready_at: float | None = None
        self.ready_task: asyncio.Task[float] | None = None
        self._popen = popen
        self._zygote = forked_by

    @classmethod
    async def start(cls, name: str, env: dict[str, str], log_path: Path, forker: Zygote | None = None) -> WorkerProc:
        """Fork from `forker`, or (without one) exec `python -m cli worker`."""
        if forker is None:
            popen = await asyncio.to_thread(_exec_worker, env, log_path)
            return cls(name, log_path, popen.pid, popen=popen)
        pid = await asyncio.to_thread(forker.spawn, env, log_path, ["dagent", "worker"])
        return cls(name, log_path, pid, forked_by=forker)

    def returncode(self) -> int | None:
        if self._popen is not None:
            return self._popen.poll()
        assert self._zygote is not None
        return self._zygote.exit_code(self.pid)

    def alive(self) -> bool:
        return self.returncode() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    async def wait_ready(self, wait_s: float = 60.0) -> float:
        deadline = time.monotonic() + wait_s
        while READY_MARKER not in self.log_text():
            if not self.alive():
                raise RuntimeError(f"{self.name} (pid {self.pid}) exited with {self.returncode()} before it was "
                                   f"ready:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} (pid {self.pid}) not ready after {wait_s:.0f} s:\n{self.tail()}")
            await asyncio.sleep(0.02)
        self.ready_at = time.monotonic()
        self.ready_s = self.ready_at - self.started
        return self.ready_s

    async def kill(self) -> float:
        """SIGKILL, and wait until the process is gone. Returns when the signal was sent (monotonic)."""
        sent = time.monotonic()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        await asyncio.to_thread(self._wait_gone, 10.0)
        return sent

    def _wait_gone(self, seconds: float) -> None:
        if self._popen is not None:
            self._popen.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.002)


# --------------------------------------------------------------------------------------------------
# the activity journal


class Journal:
    """Tails `journal.jsonl`: which model/tool calls are in flight, on which pid, and recent ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._rest = b""
        self.open: Counter[tuple[int, str, str]] = Counter()  # (pid, kind, key) -> attempts in flight
        self.starts: Counter[tuple[str, str]] = Counter()  # (kind, key) -> executions started
        self.last_end: dict[int, float] = {}  # pid -> time of its latest "end"

    def refresh(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for raw in lines:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            slot = (int(line["pid"]), str(line["kind"]), str(line["key"]))
            if line["ev"] == "start":
                self.open[slot] += 1
                self.starts[(slot[1], slot[2])] += 1
            else:
                self.open[slot] -= 1
                if self.open[slot] <= 0:
                    del self.open[slot]
                self.last_end[slot[0]] = max(self.last_end.get(slot[0], 0.0), float(line["t"]))

    def in_flight(self, pid: int | None = None) -> list[tuple[int, str, str]]:
        return sorted(slot for slot in self.open if pid is None or slot[0] == pid)


def _prompt_of(key: str) -> str:
    return key.split("/", 1)[0]


# --------------------------------------------------------------------------------------------------
# prompts


@dataclass
class Tracked:
    index: int
    handle: PromptHandle
    reference: bool
    started: float
    state: str = "starting"
    first_pending: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    result: Prompt | None = None
    finished: float | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        return self.result is None and self.error is None


@dataclass(frozen=True)
class KillPlan:
    target: str
    delay: float  # after the previous restart, before looking for the target phase
    offset: float  # after the target phase was seen
    downtime: float  # killed -> restart begins
    pick: float  # which ready worker is the victim (position in start order)
    refill: bool  # worker target: first wait until at most one replacement is still starting


def kill_plan(seed: int, kills: int, target: Target, pace: float = DEFAULT_PACE) -> list[KillPlan]:
    rng = random.Random(seed)
    max_down = 0.3 if target == "worker" else 1.0
    return [KillPlan(target=rng.choice(TARGETS), delay=rng.uniform(0.05, pace), offset=rng.uniform(0.0, 0.06),
                     downtime=rng.uniform(0.0, max_down), pick=rng.random(), refill=rng.random() < REFILL_SHARE)
            for _ in range(kills)]


def shape(prompt: Prompt) -> list[Any]:
    """The output array without timestamps."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(entry.model_dump(mode="json")) for entry in prompt.output]


TIMEOUT_MARK = "activity StartToClose timeout"


def _exhausted(prompt: Prompt) -> str | None:
    """How `prompt` ran out of retries (a model call: the prompt failed; a tool call: its result), or None."""
    if prompt.state == "failed" and TIMEOUT_MARK in (prompt.error or ""):
        return f"model call out of attempts, prompt failed after round {prompt.rounds}: {prompt.error}"
    for entry in prompt.output:
        if isinstance(entry, ToolOutput) and TIMEOUT_MARK in str(getattr(entry.result, "error", "")):
            return f"tool call {entry.id} ({entry.tool}) out of attempts: {entry.result!r:.200}"
    return None


def _pid_of(identity: str) -> int | None:
    head = identity.split("@", 1)[0]
    return int(head) if head.isdigit() else None


async def _quietly(awaitable: Awaitable[Any], seconds: float) -> Any:
    """The awaitable's result, or None if it failed or took longer than `seconds` (worker/server down)."""
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except Exception:
        return None


# --------------------------------------------------------------------------------------------------
# the harness


class Harness:
    def __init__(self, seed: int, prompts: int, kills: int, target: Target, workdir: Path, *,
                 spawn: Spawn = "fork", rescue: bool = True, settle_s: float = 90.0,
                 stuck_after_s: float = 10.0, pool: int = 3, pace: float = DEFAULT_PACE,
                 log: Callable[[str], None] | None = None) -> None:
        self.seed, self.prompts, self.kills, self.target = seed, prompts, kills, target
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
        prompt = await _quietly(t.handle.get(), 1.0)
        if prompt is None or not t.active:
            return
        t.state = prompt.state
        now = time.monotonic()
        for entry in prompt.output:
            if not (isinstance(entry, ToolOutput) and isinstance(entry.result, ToolPending)):
                continue
            first = t.first_pending.setdefault(entry.id, now)
            if now - t.sent.get(entry.id, -1e9) < 3.0 or now - first < self._approval_delay(t, entry.id):
                continue
            approve = self._decision_for(t, entry.id)
            if approve is None:
                self.report.problems.append(f"{t.handle.id}: unexpected pending call {entry.id} ({entry.tool})")
                approve = False
            try:
                if approve:
                    await asyncio.wait_for(t.handle.approve(entry.id, by=APPROVER), 5.0)
                else:
                    await asyncio.wait_for(t.handle.reject(entry.id, by=APPROVER, reason=REJECT_REASON), 5.0)
            except (RPCError, DecisionRefused, TimeoutError):
                continue  # not delivered (server down): next round
            t.sent[entry.id] = now

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
        description = await _quietly(t.handle.workflow.describe(), 2.0)
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
            pid = _pid_of(pa.last_worker_identity)
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
            description = await _quietly(t.handle.workflow.describe(), 5.0)
            if description is not None:
                pending = ", ".join(f"{pa.activity_type.name}#{pa.attempt} "
                                    f"{PendingActivityState.Name(pa.state)} {pa.last_worker_identity}"
                                    for pa in description.raw_description.pending_activities) or "none"
            self.report.problems.append(f"{what}: {t.handle.id} did not finish within {seconds:.0f} s "
                                        f"(last state {t.state}; pending activities: {pending})")
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

    def _classify(self, number: int, plan: KillPlan, seen: bool, pid: int | None, killed_at: float,
                  flying: list[tuple[int, str, str]]) -> KillRecord:
        """Where a kill landed: calls in flight (journal), a call that had just ended (its result was being
        recorded: between calls/rounds), prompts waiting for approval (last polled state)."""
        crash = [t for t in self.tracked if not t.reference and t.active]
        busy = {_prompt_of(key) for _, _, key in flying}
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
        deadline = time.monotonic() + TARGET_WAIT_S
        while not seen and time.monotonic() < deadline:
            if victim is None or plan.target == "approval":  # not about one worker
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
            await asyncio.sleep(plan.downtime)
            self._restarts.append((record, killed_at, await self.spawn_worker()))
        else:
            self.journal.refresh()
            flying = self.journal.in_flight()
            killed_at = time.monotonic()
            await asyncio.to_thread(self.server.kill)
            record = self._classify(number, plan, seen, None, killed_at, flying)
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
            self.approve_now = True
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
        effects = Counter(line["key"] for line in ledger if line["kind"] == "charge")
        attempts = Counter(line["key"] for line in ledger if line["kind"] == "charge.attempt")
        lookups = Counter(line["key"] for line in ledger if line["kind"] == "lookup")
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
            exhausted = _exhausted(got) if got is not None else None
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
            want = scenario.expected_usage(t.index)
            if got.usage != want or got.usage != ref.usage or got.rounds != scenario.expected_rounds(t.index):
                report.usage_problems.append(f"{name}: usage {got.usage!r}, rounds {got.rounds}; expected {want!r}, "
                                             f"rounds {scenario.expected_rounds(t.index)}")
            runs = sum(n for (kind, key), n in self.journal.starts.items()
                       if kind == "model" and _prompt_of(key) == name)
            report.model_calls_rerun += max(0, runs - got.rounds)
            report.lookups_rerun += sum(n - 1 for key, n in lookups.items() if _prompt_of(key) == name and n > 1)

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
            history = await _quietly(t.handle.workflow.fetch_history(), 10.0)
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
    for run in range(runs):
        seed = args.seed + run
        workdir = base / f"{args.target}-seed{seed}" if runs > 1 or args.workdir is None else base
        report = run_harness(seed, prompts, kills, args.target, workdir, spawn=args.spawn, rescue=args.rescue,
                             settle_s=settle, pool=args.pool, pace=pace, log=print if args.verbose else None)
        print(report.summary(), flush=True)
        print(f"  report: {workdir / 'report.json'}", flush=True)
        failures += not report.ok
    if runs > 1:
        print(f"{runs - failures}/{runs} runs OK", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    from tests.crash import harness as _module  # one copy of the module (and of its zygote), not two

    code = _module.main()
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: the Temporal SDK can crash there (sdk-python#300)
