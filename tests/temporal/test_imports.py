"""A process imports only what it uses: a plain worker (scripted model, no MCP server, no tracing, local blob
store) and `dagent --help` load no optional extra's package — read from the real processes with
`python -X importtime`, which lists every module the interpreter imported."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.extras import MissingExtra, explain_missing, import_extra, missing_modules, require
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from tests.support.processes import REPO_ROOT, WorkerProcess

# The extras' packages (and the provider SDKs, which load when a provider of theirs is configured). `google` is
# the cloud clients, not `google.protobuf` (temporalio's own wire format).
NOT_IN_A_PLAIN_PROCESS = ("fastapi", "uvicorn", "starlette", "sse_starlette", "ag_ui", "mcp", "httpx", "opentelemetry",
                          "boto3", "botocore", "aioboto3", "aiobotocore", "gcloud", "google.cloud", "google.auth",
                          "openai", "anthropic", "temporalio.contrib.opentelemetry")


# What a plain worker (no decision key, no codec keys, no correction or JSON-schema tool, stderr not a terminal)
# loads only when asked (issue 28: idle RSS, first poll): decision tokens (workflows/decision_tokens.py, and
# cryptography also for codec keys: config/storage/codec.py, workers/settings.py), schema checks
# (workflows/corrections.py, agent/tools.py, agent/output_schema.py), the client package (cli/common.py),
# structlog's console helpers (agent/logging.py; colorama is left out: `-X importtime` lists an import refused
# by a None in sys.modules too, and it is no dependency of ours), anyio (activities/mcp_tools.py) and rich's
# emoji table (cli/common.py's consoles print text as given).
NOT_IN_A_PLAIN_WORKER = ("jwt", "cryptography", "jsonschema", "durable_agent.client", "rich.traceback", "rich.pretty",
                         "pygments", "anyio", "rich._emoji_codes")


def imported_modules(importtime_log: str) -> set[str]:
    """Module names from `-X importtime` lines: `import time: self | cumulative | <indent>module`."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime_log.splitlines()
            if line.startswith("import time:") and line.count("|") == 2} - {"imported package"}


def loaded_by_rich_console() -> set[str]:
    """What importing the installed rich's Console loads by itself: rich before 14 imports its pretty-printer and
    emoji table there (the lowest supported rich, 13.8), so a CLI process cannot avoid them on that version."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import rich.console"], capture_output=True,
                          text=True, check=True)
    return imported_modules(done.stderr)


def forbidden(modules: set[str], packages: tuple[str, ...] = NOT_IN_A_PLAIN_PROCESS) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in packages))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DAGENT_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
    return {**env, **extra}


def test_dagent_help_imports_no_extra() -> None:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "durable_agent.cli", "--help"], env=_env(),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Durable Agent" in done.stdout and "worker" in done.stdout
    modules = imported_modules(done.stderr)
    assert "durable_agent.cli.app" in modules  # the log is the real one
    assert forbidden(modules) == []
    print(f"\n`dagent --help`: {elapsed:.2f} s wall (with -X importtime), {len(modules)} modules imported")


# What makes `dagent --help` slow (issue #28: <= 0.4 s): none of it may load to print the help. (A command's
# own help loads pydantic: typer builds its options' converters with it. The list of commands does not.)
NOT_FOR_HELP = ("temporalio", "jwt", "cryptography", "fastapi", "jsonschema", "structlog", "durable_agent.client",
                "durable_agent.workflows", "durable_agent.workers", "durable_agent.activities", "durable_agent.api")


def _help_modules(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "durable_agent.cli", *args, "--help"],
                          env=_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Usage:" in done.stdout
    return imported_modules(done.stderr)


@pytest.mark.parametrize("args", [(), ("worker",), ("pending",), ("store",), ("schedule", "ls")])
def test_help_loads_no_temporal_pydantic_or_crypto(args: tuple[str, ...]) -> None:
    modules = _help_modules(*args)
    assert "durable_agent.cli.app" in modules  # the log is the real one
    not_here = NOT_FOR_HELP + (("pydantic",) if not args else ())
    assert sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in not_here)) == []


def test_a_command_imports_only_its_own_module() -> None:
    """The root group is lazy: `dagent ls --help` builds `ls` alone, not the worker's or the API's module."""
    modules = _help_modules("ls")
    assert "durable_agent.cli.commands.inspect" in modules
    assert {"durable_agent.cli.commands.services", "durable_agent.cli.commands.decide",
            "durable_agent.cli.deploy"} & modules == set()


async def test_a_plain_worker_runs_a_prompt_without_any_extra(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`dagent worker` with the defaults (demo plugin, scripted model) runs a prompt through a tool and an
    approval; everything it imported on the way is in its -X importtime log."""
    queue = f"imports-{uuid.uuid4().hex[:8]}"
    env = _env(TEMPORAL_ADDRESS=dev_env.client.service_client.config.target_host, DAGENT_TASK_QUEUE=queue,
               DAGENT_FILE_DIR=str(tmp_path / "files"), DAGENT_PAYLOAD_DIR=str(tmp_path / "payloads"),
               DAGENT_LOG_LEVEL="WARNING")
    worker = WorkerProcess({**env, "PYTHONPROFILEIMPORTTIME": "1"}, tmp_path / "worker.log")  # = -X importtime
    try:
        deadline = time.monotonic() + 60
        while not worker.ready():
            assert time.monotonic() < deadline, "the worker did not start"
            await asyncio.sleep(0.1)
        settings = Settings(temporal_address=env["TEMPORAL_ADDRESS"], task_queue=queue,
                            file_dir=env["DAGENT_FILE_DIR"], payload_dir=env["DAGENT_PAYLOAD_DIR"])
        agent = await AgentClient.connect(settings)
        handle = await agent.start("Plan my Paris trip and pay the deposit.", user_id="imports")
        await handle.wait_until("waiting_for_approval", poll_interval=0.2)
        [pending] = await handle.pending_approvals()
        await handle.approve(pending.tool_call_id, by="imports", wait=True)
        prompt = await handle.result()
        assert prompt.state == "completed", prompt.error
        paid = prompt.tool_call(pending.tool_call_id)
        assert paid is not None and paid.tool == "payment.send" and paid.result.type == "success"
    finally:
        worker.kill()
    modules = imported_modules(worker.log_path.read_text(errors="replace"))
    assert {"durable_agent.workers.worker", "durable_agent.activities.agent_activities", "structlog"} <= modules
    assert forbidden(modules) == []
    assert forbidden(modules - loaded_by_rich_console(), NOT_IN_A_PLAIN_WORKER) == []


def test_a_missing_extra_is_one_line_naming_the_extra_and_the_command() -> None:
    with pytest.raises(MissingExtra) as raised:
        import_extra("no_such_module_of_an_extra", "mcp", feature="MCP servers as tools")
    assert str(raised.value) == ("MCP servers as tools needs the 'mcp' extra (no_such_module_of_an_extra is not "
                                 "installed): pip install 'durable-agent[mcp]'")
    assert isinstance(raised.value, ImportError) and raised.value.extra == "mcp"
    # the CLI's safety net for an import not routed through import_extra
    explained = explain_missing(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"), "dagent api")
    assert isinstance(explained, MissingExtra) and explained.extra == "api"
    other = ModuleNotFoundError("No module named 'left_pad'", name="left_pad")
    assert explain_missing(other, "x") is other
    assert missing_modules("server") == [] and require("server", "the dev server") is None  # a binary, no module


@pytest.mark.parametrize("args", [(), ("--plugin", "durable_agent.plugins.demo:plugin")],
                         ids=["bare", "with-options"])
async def test_the_worker_process_loads_no_command_line(dev_env: WorkflowEnvironment, tmp_path: Path,
                                                        args: tuple[str, ...]) -> None:
    """A bare `dagent worker` (settings from the environment) starts the worker without loading typer or rich
    (cli/entry.py); with options it parses them, then becomes `python -m durable_agent.cli.worker_process` (the
    same pid, so signals and the ready file's pid still hold). Either way the running worker carries none of the
    command line: 8 MiB for as long as it runs (issue 28, idle RSS)."""
    env = _env(TEMPORAL_ADDRESS=dev_env.client.service_client.config.target_host,
               DAGENT_TASK_QUEUE=f"lean-{uuid.uuid4().hex[:8]}", DAGENT_FILE_DIR=str(tmp_path / "files"),
               DAGENT_PAYLOAD_DIR=str(tmp_path / "payloads"), DAGENT_LOG_LEVEL="WARNING", PYTHONPROFILEIMPORTTIME="1",
               DAGENT_MODEL_CALLS="local" if args else "activity")
    worker = WorkerProcess(env, tmp_path / "worker.log", *args)
    try:
        deadline = time.monotonic() + 60
        while not worker.ready():
            assert time.monotonic() < deadline, "the worker did not start"
            await asyncio.sleep(0.1)
        command = (await asyncio.to_thread(Path(f"/proc/{worker.pid}/cmdline").read_bytes)).split(b"\0")
    finally:
        worker.kill()
    log = worker.log_path.read_text(errors="replace")
    assert "worker on " in log
    # with local model calls the start line says how many run at once (half the default cache of 64)
    assert ("model_calls=local workflow_tasks=32" in log) == bool(args)
    header = "import time: self [us] | cumulative | imported package"
    assert log.count(header) == (2 if args else 1)  # with options: the command's interpreter, then the worker's
    worker_modules = imported_modules(log[log.rindex(header):])
    assert "durable_agent.workers.worker" in worker_modules
    if args:
        assert command[1:3] == [b"-m", b"durable_agent.cli.worker_process"], command
        assert {"typer", "rich.console"} <= imported_modules(log[:log.rindex(header)])  # seen where they load
    # (a bare `rich` is structlog's import attempt, refused on purpose when stderr is not a terminal)
    assert sorted(m for m in worker_modules if m.split(".")[0] in ("typer", "click") or m.startswith("rich.")) == []
