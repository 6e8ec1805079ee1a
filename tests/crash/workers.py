"""Worker processes for the crash harness: forked from a zygote that imported the worker once, or exec'd."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.crash.constants import READY_MARKER, REPO_ROOT, SOURCE_DIRS, ZYGOTE_PRELOAD

# --------------------------------------------------------------------------------------------------
# worker processes


def _zygote_child(command: dict[str, Any]) -> None:  # pragma: no cover - runs in a forked child
    """A forked worker: exactly what `dagent worker` becomes (cli/worker_process.py; the command execs it, which
    in a fork would import everything again), its output into the log file."""
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
        from durable_agent.cli.worker_process import main

        main()
    finally:
        os._exit(70)  # `main()` leaves with os._exit itself; getting here means it raised


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
        self.proc = subprocess.Popen([sys.executable, "-c", "from tests.crash.workers import zygote_main; "
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
        return subprocess.Popen([sys.executable, "-m", "durable_agent.cli", "worker"], env=env, cwd=REPO_ROOT,
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
