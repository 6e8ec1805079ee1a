"""The CLI with batches and its failure lines: `run --no-interactive` lists every waiting call and the `--all`
form; `approve` reports each decision as taken and exits 0 when the decisions were taken (one call of a batch
included); `dagent api` without a Temporal server (or with its port taken) fails in one line; Temporal UI links
point at the UI the local dev server really has."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import ApprovalRequest, Conversation, Decision, ToolOutput
from durable_agent.cli.devserver import free_port
from durable_agent.cli.follow import LiveView
from durable_agent.cli.ui_links import SERVERS_DIR_ENV, forget_server, recorded_ui, remember_server, with_ui_url
from durable_agent.workers.settings import Settings
from durable_agent.workflows import names
from durable_agent.workflows.protocol import StreamEvent
from tests.support import batch_desk
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker

OFFLINE = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1", "DAGENT_LOG_LEVEL": "WARNING"}  # nothing listens


def dagent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT_CMD, *args], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


async def test_batch_output_of_run_and_approve(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
        run = await asyncio.to_thread(dagent, env, "run", "--no-interactive", "--user", "ann", batch_desk_text())
        prompt_id = re.search(r"^prompt (prompt-\w+)$", run.stdout, re.M).group(1)  # type: ignore[union-attr]
        one = await asyncio.to_thread(dagent, env, "approve", prompt_id, "call_r1_1", "--by", "alice")
        every = await asyncio.to_thread(dagent, env, "approve", prompt_id, "--all", "--by", "dave")
        record = await client.prompt(prompt_id).result()

    out = run.stdout
    assert run.returncode == 0, run.stderr
    assert "The prompt is waiting for 3 decisions; it goes on once every one is in:" in out
    for call_id, tool in (("call_r1_0", "payment.send"), ("call_r1_1", "payment.send"), ("call_r1_2", "email.send")):
        assert re.search(rf"^  {call_id}  {re.escape(tool)} \{{", out, re.M), out
        assert f"  dagent approve {prompt_id} {call_id}\n" in out
    assert f"  dagent approve {prompt_id} --all\n" in out and f"  dagent reject {prompt_id} --all" in out
    assert "→ running" not in out  # no waiting call shown as running first
    assert out.rstrip().endswith("state: waiting for approval")
    assert "\nstate   waiting for approval\n" in out and "state   waiting_for_approval" not in out  # human words

    assert one.returncode == 0 and one.stderr == "", one  # taken; it runs with the rest of its batch
    assert re.fullmatch(r'tool    payment\.send \{"to": "Globex", "amount": 120\} \[call_r1_1\] → approved by alice '
                        r"at \d\d:\d\d:\d\d; runs when the other 2 decisions are in\n", one.stdout), one.stdout

    assert every.returncode == 0 and every.stderr == "", every
    lines = every.stdout.splitlines()
    assert re.fullmatch(r".*\[call_r1_0\] → approved by dave at \d\d:\d\d:\d\d; runs when the other 1 decision is in",
                        lines[0]), lines
    assert re.fullmatch(r'.*\[call_r1_2\] → \{"status": "sent", .*\(approved by dave at \d\d:\d\d:\d\d\)', lines[1])
    assert re.fullmatch(r'.*\[call_r1_0\] → \{"status": "sent", "to": "ACME Corp", .*\(approved by dave at .*\)',
                        lines[2])  # then how the call that waited ended
    assert len(lines) == 3
    calls = [o for o in record.output if isinstance(o, ToolOutput)]
    assert [(c.id, c.decision.by) for c in calls] == [  # type: ignore[union-attr]
        ("call_r1_0", "dave"), ("call_r1_1", "alice"), ("call_r1_2", "dave")]
    assert all(c.result is not None and c.result.type == "success" for c in calls)


def batch_desk_text() -> str:
    return "batch: pay both invoices and email ACME"


def test_the_spinner_says_what_the_prompt_waits_for() -> None:
    view = LiveView(Console(file=io.StringIO(), width=200))
    now = datetime.now(UTC)
    entries = [ToolOutput(id=f"call_r1_{i}", tool=tool, input=args, started_at=now,
                          result=ApprovalRequest(reason="needs a person", requested_at=now))
               for i, (tool, args) in enumerate(batch_desk.BATCH_CALLS)]
    view.set_step("running weather.get")
    for index, entry in enumerate(entries, 1):
        view.event(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=index, output=entry))
    assert view._status_text().startswith("waiting for 3 approvals: payment.send, payment.send, email.send (")
    assert view._status_text().endswith("· running weather.get")
    decided = entries[0].model_copy(update={"decision": Decision(decision="approved", by="alice", at=now)})
    view.event(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=1, output=decided))
    assert view._status_text().startswith("waiting for 2 approvals: payment.send, email.send (")
    for index, entry in ((2, entries[1]), (3, entries[2])):
        done = entry.model_copy(update={"decision": Decision(decision="rejected", by="bob", at=now)})
        view.event(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=index, output=done))
    assert not view._status_text().startswith("waiting")
    restricted = entries[0].model_copy(update={"result": ApprovalRequest(reason="wire", requested_at=now,
                                                                     approvers=["finance"])})
    view.event(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=1, output=restricted))
    assert view._status_text().startswith("waiting for approval of payment.send (approvers: finance) (")


def test_dagent_api_and_server_fail_in_one_line() -> None:
    no_server = dagent(OFFLINE, "api", "--port", str(free_port()))
    assert no_server.returncode == 1, no_server
    assert no_server.stderr.splitlines() == [
        "error: no Temporal server at 127.0.0.1:1 — start one with `dagent server` (or point TEMPORAL_ADDRESS or "
        "--address at yours)"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = dagent(OFFLINE, "api", "--port", str(port))
        server = dagent(OFFLINE, "server", "--port", str(port), "--db-file", "/nonexistent/never-created.db")
    for failed in (busy, server):
        assert failed.returncode == 1 and len(failed.stderr.splitlines()) == 1, failed
        assert failed.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}: "), failed.stderr
        assert failed.stderr.rstrip().endswith("choose another --port")


def test_ui_address_comes_from_the_record_of_a_live_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a dev server `dagent` started and that still runs gives its UI address; nothing else is guessed."""
    monkeypatch.setenv(SERVERS_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("DAGENT_UI_URL", raising=False)
    settings = Settings(temporal_address="127.0.0.1:7300")
    assert with_ui_url(settings).ui_url == "http://127.0.0.1:8233"  # no record: the default
    remember_server("127.0.0.1:7300", "http://localhost:7301", os.getpid())
    assert recorded_ui("localhost:7300") == "http://localhost:7301"
    assert with_ui_url(settings).ui_url == "http://localhost:7301"
    assert recorded_ui("temporal.example.com:7300") is None  # a record is about this machine only
    monkeypatch.setenv("DAGENT_UI_URL", "https://temporal.example.com")
    assert with_ui_url(settings) is settings  # the setting wins
    monkeypatch.delenv("DAGENT_UI_URL")
    forget_server("127.0.0.1:7300", os.getpid() + 1)  # another server's stop leaves this record alone
    assert recorded_ui("127.0.0.1:7300") == "http://localhost:7301"
    dead = subprocess.Popen(["true"])
    dead.wait()
    remember_server("127.0.0.1:7300", "http://localhost:7301", dead.pid)  # a server that was killed
    assert recorded_ui("127.0.0.1:7300") is None and not list(tmp_path.iterdir())  # ignored and removed


def test_cli_links_use_the_ui_port_the_server_really_has(tmp_path: Path) -> None:
    """`dagent server` on unusual ports records its UI; `dagent run` elsewhere links to it; once the server
    stops, the record is gone."""
    port, ui_port = free_port(), free_port()
    env = {**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}", "DAGENT_LOG_LEVEL": "WARNING",
           "DAGENT_TASK_QUEUE": "no-worker-here", SERVERS_DIR_ENV: str(tmp_path / "servers")}
    env.pop("DAGENT_UI_URL", None)
    server = subprocess.Popen([*DAGENT_CMD, "server", "--port", str(port), "--ui-port", str(ui_port),
                               "--db-file", str(tmp_path / "ui.db")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert f"UI: http://localhost:{ui_port}" in banner, banner
        linked = _first_lines_of_run(env)
        chosen = _first_lines_of_run({**env, "DAGENT_UI_URL": "https://temporal.example.com"})
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    prompt_id = linked[0].removeprefix("prompt ")
    assert linked[1] == f"Temporal UI: http://localhost:{ui_port}/namespaces/default/workflows/{prompt_id}"
    assert chosen[1].startswith("Temporal UI: https://temporal.example.com/namespaces/default/workflows/")
    assert not list((tmp_path / "servers").iterdir())  # stopped: no record left behind


def _first_lines_of_run(env: dict[str, str]) -> list[str]:
    """The first two lines `dagent run` prints (no worker: it would wait; it is stopped after them)."""
    proc = subprocess.Popen([*DAGENT_CMD, "run", "--no-interactive", "hello"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        return [proc.stdout.readline().rstrip("\n"), proc.stdout.readline().rstrip("\n")]
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def test_chat_asks_about_a_batch_one_call_at_a_time(dev_env: WorkflowEnvironment) -> None:
    """`dagent chat` follows its prompts with the same code as `run`: answers (here piped) go, in order, to the
    calls asked, one question each."""
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
        chat = await asyncio.to_thread(
            subprocess.run, [*DAGENT_CMD, "chat", "--user", "chatter"], env=env, capture_output=True, text=True,
            timeout=120, input=f"{batch_desk_text()}\nn\ny\nn\n\n")
        conversation_id = re.search(r"^conversation (conv-\w+)", chat.stdout, re.M).group(1)  # type: ignore[union-attr]
        conversation = await client.client.get_workflow_handle(conversation_id).query(
            names.GET_CONVERSATION_QUERY, result_type=Conversation)
        prompt = await client.prompt(conversation.prompt_ids[0]).result()
    assert chat.returncode == 0, chat.stderr
    questions = re.findall(r"approval needed: \[(\d)\] (\S+)", chat.stdout)
    assert questions == [("1", "payment.send"), ("2", "payment.send"), ("3", "email.send")], chat.stdout
    assert "2 more waiting after this one" in chat.stdout and "1 more waiting after this one" in chat.stdout
    calls = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert [(c.decision.decision, c.decision.by) for c in calls] == [  # type: ignore[union-attr]
        ("rejected", "chatter"), ("approved", "chatter"), ("rejected", "chatter")]


async def test_a_followed_prompt_that_ends_cancelled_exits_1_with_one_line_on_stderr(
        dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
        run = _start(["run", "--interactive", "--user", "ann", batch_desk_text()], env, subprocess.PIPE)
        assert run.stdout is not None
        first = await asyncio.to_thread(run.stdout.readline)
        prompt_id = first.strip().removeprefix("prompt ")
        handle = client.prompt(prompt_id)
        await handle.wait_until("waiting_for_approval")
        watch = _start(["watch", prompt_id], env, subprocess.DEVNULL)
        await asyncio.sleep(3)  # both are following (the run asks its first question)
        await handle.cancel()
        await handle.wait_until("cancelled")
        ran_out, ran_err = await asyncio.to_thread(run.communicate, timeout=90)
        watched_out, watched_err = await asyncio.to_thread(watch.communicate, timeout=90)
        assert (await handle.get()).state == "cancelled"
    assert "Approve payment.send? [y/N]" in ran_out and "state: cancelled" in ran_out
    assert watched_out.rstrip().endswith("state   cancelled")
    for code, err in ((run.returncode, ran_err), (watch.returncode, watched_err)):
        assert code == 1 and err.splitlines() == [f"error: prompt {prompt_id} was cancelled"], (code, err)


def _start(args: list[str], env: dict[str, str], stdin: int) -> subprocess.Popen[str]:
    return subprocess.Popen([*DAGENT_CMD, *args], env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
