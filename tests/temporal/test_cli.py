"""End to end through the shell: `dagent worker`, `dagent run`, the raw `temporal` CLI, `dagent show`."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.cli.devserver.binaries import temporal_cli_path

DAGENT = [sys.executable, "-m", "durable_agent.cli"]


@pytest.fixture
def cli_env(dev_env: WorkflowEnvironment, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "DAGENT_TASK_QUEUE": f"cli-{uuid.uuid4().hex[:8]}",
        "DAGENT_FILE_DIR": str(tmp_path / "files"),
        "DAGENT_LOG_LEVEL": "WARNING",
        "PATH": f"{Path(temporal_cli_path()).parent}{os.pathsep}{env.get('PATH', '')}",
    })
    return env


@pytest.fixture
def worker_process(cli_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen([*DAGENT, "worker"], env=cli_env, stdout=log, stderr=subprocess.STDOUT)
    yield proc
    proc.terminate()
    proc.wait(timeout=15)
    log.close()


def dagent(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_run_waits_for_approval_then_raw_temporal_signal_completes_it(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:
    started = dagent("run", "Plan my trip", "--no-interactive", "--user", "cli-user", env=cli_env)
    assert started.returncode == 0, started.stderr
    out = started.stdout
    prompt_id = re.search(r"^prompt (prompt-\w+)$", out, re.M).group(1)  # type: ignore[union-attr]
    assert f"/namespaces/default/workflows/{prompt_id}" in out  # the Temporal UI link
    assert "weather.get" in out and "widget  forecast" in out and "file    paris-trip.md" in out
    assert "waiting for approval: Sending $250 requires approval." in out
    assert "state: waiting for approval" in out

    pending = dagent("pending", "--user", "cli-user", env=cli_env)
    deadline = time.monotonic() + 10
    while prompt_id not in pending.stdout and time.monotonic() < deadline:  # visibility lags a little
        time.sleep(0.2)
        pending = dagent("pending", "--user", "cli-user", env=cli_env)
    assert prompt_id in pending.stdout and "payment.send" in pending.stdout

    # The exact command `dagent run` printed (and docs/approvals.md shows), run by the real temporal CLI.
    signal_line = next(line.strip() for line in out.splitlines() if line.strip().startswith("temporal workflow signal"))
    signal_result = subprocess.run(shlex.split(signal_line), env=cli_env, capture_output=True, text=True, timeout=30)
    assert signal_result.returncode == 0, signal_result.stderr

    deadline = time.monotonic() + 20
    shown = dagent("show", prompt_id, env=cli_env)
    while "state=completed" not in shown.stdout and time.monotonic() < deadline:
        time.sleep(0.2)
        shown = dagent("show", prompt_id, env=cli_env)
    assert "state=completed" in shown.stdout, shown.stdout + shown.stderr
    assert '"status": "sent"' in shown.stdout and "The deposit is paid." in shown.stdout

    call_id = re.search(r"dagent approve \S+ (\S+)", out).group(1)  # type: ignore[union-attr]
    again = dagent("approve", prompt_id, call_id, env=cli_env)
    assert again.returncode == 1 and "refused" in again.stderr and "completed" in again.stderr


def test_run_rejection_from_dagent_reject(cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:
    started = dagent("run", "Plan my trip", "--no-interactive", env=cli_env)
    prompt_id = re.search(r"^prompt (prompt-\w+)$", started.stdout, re.M).group(1)  # type: ignore[union-attr]
    call_id = re.search(r"dagent reject \S+ (\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    rejected = dagent("reject", prompt_id, call_id, "--reason", "over budget", env=cli_env)
    assert rejected.returncode == 0, rejected.stderr
    assert "error: The call was rejected by" in rejected.stdout and "over budget" in rejected.stdout
    shown = dagent("show", prompt_id, "--json", env=cli_env)
    assert json.loads(shown.stdout)["state"] in ("completed", "running")  # exactly one JSON document


def test_approve_with_the_readme_correction(cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:
    started = dagent("run", "Plan my trip", "--no-interactive", env=cli_env)
    prompt_id = re.search(r"^prompt (prompt-\w+)$", started.stdout, re.M).group(1)  # type: ignore[union-attr]
    call_id = re.search(r"dagent approve \S+ (\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    invalid = dagent("approve", prompt_id, call_id, "--input", '{"amount": -5}', env=cli_env)
    assert invalid.returncode == 1 and "invalid correction for payment.send: amount" in invalid.stderr
    approved = dagent("approve", prompt_id, call_id, "--input", '{"amount": 90}', env=cli_env)  # docs/approvals.md
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert '"amount": 90' in approved.stdout and '"status": "sent"' in approved.stdout


def test_bad_command_input_gets_clear_errors(cli_env: dict[str, str]) -> None:
    bad_json = dagent("approve", "prompt-x", "call-x", "--input", "[1, 2]", env=cli_env)
    assert bad_json.returncode != 0 and "--input must be a JSON object" in bad_json.stderr
    bad_tier = dagent("run", "hi", "--model", "huge", env=cli_env)
    assert bad_tier.returncode != 0 and "normal" in bad_tier.stderr


def test_watch_follows_a_waiting_prompt_to_completion(cli_env: dict[str, str],
                                                      worker_process: subprocess.Popen[bytes]) -> None:
    started = dagent("run", "Plan my trip", "--no-interactive", env=cli_env)
    prompt_id = re.search(r"^prompt (prompt-\w+)$", started.stdout, re.M).group(1)  # type: ignore[union-attr]
    call_id = re.search(r"dagent approve \S+ (\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    watcher = subprocess.Popen([*DAGENT, "watch", prompt_id], env=cli_env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    assert dagent("approve", prompt_id, call_id, "--by", "ops", env=cli_env).returncode == 0
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert "[0] text    Let me check the forecast" in out  # replayed from the start of the stream
    assert "waiting for approval" in out and '"status": "sent"' in out
    assert out.rstrip().endswith("state   completed")


def test_chat_runs_a_conversation_with_inline_approval(cli_env: dict[str, str],
                                                       worker_process: subprocess.Popen[bytes]) -> None:
    chat = subprocess.run([*DAGENT, "chat", "--user", "chatter"], env=cli_env, input="Plan my trip\ny\n\n",
                          capture_output=True, text=True, timeout=90)
    assert chat.returncode == 0, chat.stderr
    assert re.search(r"^conversation conv-\w+", chat.stdout, re.M)
    assert "Approve payment.send" in chat.stdout
    assert "The deposit is paid." in chat.stdout
