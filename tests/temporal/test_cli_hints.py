"""`dagent` where newcomers trip: one line with what to do next, never a traceback; `dagent ls`."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from tests.temporal.test_cli import cli_env, dagent, worker_process  # noqa: F401 - fixtures


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_unknown_ids_no_server_and_no_worker_get_hints(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:  # noqa: F811
    started = dagent("run", "Plan my trip", "--no-interactive", env=cli_env)
    prompt_id = re.search(r"^prompt (prompt-\w+)$", started.stdout, re.M).group(1)  # type: ignore[union-attr]
    typo = prompt_id[:-2]
    for command in (["show", typo], ["watch", typo], ["cancel", typo], ["approve", typo, "call_r2_0"]):
        line = _one_line_error(dagent(*command, env=cli_env))
        assert line == f"error: no prompt '{typo}' — did you mean {prompt_id}?", command
    nothing_alike = _one_line_error(dagent("show", "zzzz-nothing-like-it", env=cli_env))
    assert nothing_alike == "error: no prompt 'zzzz-nothing-like-it' — `dagent ls` lists recent prompts"

    no_server = _one_line_error(dagent("show", prompt_id, "--address", "127.0.0.1:1", env=cli_env))
    assert no_server.startswith("error: no Temporal server at 127.0.0.1:1 — start one with `dagent server`")

    lonely = dict(cli_env, DAGENT_TASK_QUEUE="queue-without-worker")
    run = subprocess.Popen([sys.executable, "-m", "durable_agent.cli", "run", "hello", "--no-interactive"], env=lonely,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        warning = run.stderr.readline() if run.stderr else ""  # printed at once; the prompt itself waits on
    finally:
        run.kill()
        run.wait(timeout=30)
    assert warning.startswith("warning: no worker is polling task queue 'queue-without-worker' — start one with "
                              "`DAGENT_TASK_QUEUE=queue-without-worker dagent worker` (a worker on that queue)")


def test_ls_lists_waiting_prompts_first_and_filters(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:  # noqa: F811
    waiting = dagent("run", "Plan my trip", "--no-interactive", "--user", "ls-ann", env=cli_env)
    waiting_id = re.search(r"^prompt (prompt-\w+)$", waiting.stdout, re.M).group(1)  # type: ignore[union-attr]
    done = dagent("run", "Plan my trip", "--no-interactive", "--user", "ls-bob", env=cli_env)
    done_id = re.search(r"^prompt (prompt-\w+)$", done.stdout, re.M).group(1)  # type: ignore[union-attr]
    assert dagent("approve", done_id, "call_r2_0", env=cli_env).returncode == 0
    _until_listed(cli_env, ["--state", "completed", "--user", "ls-bob"], done_id)  # visibility lags a little

    listed = dagent("ls", env=cli_env).stdout.splitlines()
    ids = [line.split()[0] for line in listed]
    assert ids.index(waiting_id) < ids.index(done_id)  # waiting first although started earlier
    row = next(line for line in listed if line.startswith(waiting_id))
    assert re.match(rf"{waiting_id}\s+waiting for approval\s+ls-ann\s+\d+[smhd]\s+ls-ann: Plan my trip$", row)

    only_bob = dagent("ls", "--user", "ls-bob", env=cli_env).stdout.splitlines()
    assert [line.split()[0] for line in only_bob] == [done_id]
    only_waiting = dagent("ls", "--state", "waiting", "--user", "ls-ann", env=cli_env).stdout.splitlines()
    assert [line.split()[0] for line in only_waiting] == [waiting_id]
    bad = dagent("ls", "--state", "sleepy", env=cli_env)
    assert bad.returncode != 0 and "state must be one of" in bad.stderr


def _until_listed(env: dict[str, str], filters: list[str], prompt_id: str) -> None:
    deadline = time.monotonic() + 30  # a failure guard only
    while prompt_id not in dagent("ls", *filters, env=env).stdout:
        assert time.monotonic() < deadline, f"{prompt_id} never listed with {filters}"
        time.sleep(0.2)
