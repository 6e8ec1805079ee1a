"""`DevServer`: `temporal server start-dev` as a managed subprocess (start, stop, restart, kill, health)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from durable_agent.cli.devserver.arguments import dev_server_args
from durable_agent.cli.devserver.binaries import temporal_cli_path
from durable_agent.cli.devserver.ports import free_port, port_open


class DevServerError(RuntimeError):
    """The dev server failed to start, died, or did not become healthy in time."""


_live_servers: weakref.WeakSet[DevServer] = weakref.WeakSet()


@atexit.register
def _kill_leftover_servers() -> None:  # pragma: no cover - interpreter shutdown
    for server in list(_live_servers):
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)


def server_using(db_file: str | os.PathLike[str]) -> int | None:
    """The pid of a running `temporal server start-dev` on this SQLite file, if any (Linux /proc)."""
    wanted = str(Path(db_file).absolute())
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in args and b"--db-filename" in args:
            position = args.index(b"--db-filename") + 1
            if position < len(args) and args[position].decode(errors="replace") == wanted:
                return int(cmdline.parent.name)
    return None


class DevServer:
    """``temporal server start-dev`` as a managed subprocess.

        async with DevServer(db_file=".dagent/temporal.db", ui_port=8400) as server:
            client = await Client.connect(server.address)
            ...
            await server.restart_async()   # same port and SQLite file; state survives

    Sync code uses ``with DevServer(...)`` or ``start()`` / ``stop()``.

    Ports are fixed at construction (``port=None`` picks a free one), so :meth:`restart` comes back on
    the same address with the same ``db_file``. Server output (stdout and stderr) goes to ``log_file``
    (default: ``<db_file>.log``, or a file in the temp dir), never to the terminal.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        db_file: str | os.PathLike[str] | None = None,
        namespace: str = "default",
        ip: str = "127.0.0.1",
        log_level: str = "warn",
        log_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.port: int = port if port is not None else free_port()
        self.ui_port: int | None = ui_port
        self.db_file: str | None = str(Path(db_file).absolute()) if db_file is not None else None
        self.namespace = namespace
        self.ip = ip
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.extra_args: list[str] = list(extra_args)
        if log_file is not None:
            self.log_file = str(Path(log_file).absolute())
        elif self.db_file is not None:
            self.log_file = self.db_file + ".log"
        else:
            self.log_file = str(Path(tempfile.gettempdir()) / f"dagent-devserver-{self.port}.log")
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def _host(self) -> str:
        return "127.0.0.1" if self.ip in ("0.0.0.0", "", "::") else self.ip

    @property
    def address(self) -> str:
        """gRPC frontend address for clients and workers, e.g. ``"127.0.0.1:7400"``."""
        return f"{self._host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """Base URL of the Web UI, or ``None`` when headless."""
        if self.ui_port is None:
            return None
        host = "localhost" if self._host == "127.0.0.1" else self._host
        return f"http://{host}:{self.ui_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The full command line this server runs."""
        return [
            temporal_cli_path(),
            *dev_server_args(
                port=self.port,
                ui_port=self.ui_port,
                db_file=self.db_file,
                namespace=self.namespace,
                ip=self.ip,
                log_level=self.log_level,
            ),
            *self.extra_args,
        ]

    def start(self) -> Self:
        """Start the server and block until it is healthy (raises :class:`DevServerError`)."""
        with self._lock:
            if self.is_running:
                return self
            cmd = self.command()
            Path(self.log_file).parent.mkdir(parents=True, exist_ok=True)
            if self.db_file is not None:
                Path(self.db_file).parent.mkdir(parents=True, exist_ok=True)
                if (holder := server_using(self.db_file)) is not None:
                    raise DevServerError(
                        f"{self.db_file} is already used by a running Temporal server (pid {holder}): two servers "
                        "must not share one SQLite file. Use that server (dagent --address …), stop it, or pass "
                        "another --db-file.")
            with open(self.log_file, "ab") as log:
                log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
                log.flush()
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a terminal Ctrl-C reaches us, and we stop it cleanly
                )
            _live_servers.add(self)
        try:
            self._wait_healthy()
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; the exit code (a graceful stop takes 1.5-3 s)."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL (a crash, for durability tests). Returns the exit code (None if not started)."""
        return self._end(signal.SIGKILL, None)

    def _end(self, first: signal.Signals, grace: float | None) -> int | None:
        """Send ``first``, wait up to ``grace`` seconds (None: as long as it takes), then SIGKILL."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return None
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(first)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    proc.wait()
            _live_servers.discard(self)
            return proc.returncode

    def restart(self, *, kill: bool = False) -> Self:
        """Stop (or, with ``kill=True``, SIGKILL) and start again: same ports, same ``db_file``."""
        if kill:
            self.kill()
        else:
            self.stop()
        self._proc = None
        self._wait_port_free()
        return self.start()

    async def start_async(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def stop_async(self, grace_seconds: float = 10.0) -> int | None:
        """:meth:`stop` in a thread, so the event loop (e.g. a worker) keeps running meanwhile."""
        return await asyncio.to_thread(self.stop, grace_seconds)

    async def restart_async(self, *, kill: bool = False) -> Self:
        return await asyncio.to_thread(self.restart, kill=kill)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.start_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return (
            f"DevServer(address={self.address!r}, ui_url={self.ui_url!r}, db_file={self.db_file!r}, {state})"
        )

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log file."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                data = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(data.splitlines()[-lines:])

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        # Succeeds once the frontend serves *and* the namespace is registered.
        health = [
            temporal_cli_path(),
            "operator",
            "namespace",
            "describe",
            "--address",
            self.address,
            "--namespace",
            self.namespace,
            "--output",
            "none",
            "--command-timeout",
            "2s",
        ]
        while True:
            proc = self._proc
            assert proc is not None
            if proc.poll() is not None:
                raise DevServerError(
                    f"temporal dev server exited with code {proc.returncode} during startup "
                    f"(address {self.address}, log {self.log_file}). Last output:\n{self.log_tail()}"
                )
            if port_open(self._host, self.port):
                result = subprocess.run(
                    health,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
                if result.returncode == 0:
                    return
            if time.monotonic() > deadline:
                raise DevServerError(
                    f"temporal dev server at {self.address} not healthy after {self.startup_timeout:g} s "
                    f"(log {self.log_file}). Last output:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _wait_port_free(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        ports = [port for port in (self.port, self.ui_port) if port is not None]
        while any(port_open(self._host, p) for p in ports) and time.monotonic() < deadline:
            time.sleep(0.05)
