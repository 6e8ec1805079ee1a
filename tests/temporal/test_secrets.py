"""No secret (API key) ever lands in workflow history or logs (SPEC §8); logs carry no full payloads.

Two worker processes (`python -m cli worker`) run with fake OpenAI and Anthropic keys in their
environment. The normal tier is scripted (tests/support/ledger.py); the high tier is a real provider,
`openai:gpt-test` on one worker and `anthropic:claude-test` on the other, pointed at a local fake server
that answers 401 with an error message that echoes the key back (worse than the real APIs, which mask it).
So each key is actually sent in a request and comes back in an error, and the error path runs.

Prompts: one approved by signal, one approved by update (both with a long, distinctive user input), and
one per provider that fails with the 401. Then every workflow's full history is fetched and searched - as
proto-JSON and as raw serialized events (payload bytes are base64 in JSON) - and so is every file the run
wrote: worker logs, the dev server's log and SQLite database, the payload store, the ledger. A positive
control makes sure the search can see payloads at all: the user input must be found in history and in the
database. Finally the worker logs (default level, INFO) must not contain the user input.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from durable_agent.agent.models import ApprovalRequest, Prompt, ToolOutput
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import Settings
from tests.crash.constants import REPO_ROOT
from tests.crash.workers import WorkerProc
from tests.fakes import FakeLLMServer

OPENAI_KEY = "sk-test-SECRET-123"
ANTHROPIC_KEY = "sk-ant-test-SECRET-456"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY)
MARKER = "zebra-quartz-7f3a"
LONG_INPUT = (f"{MARKER}: note it, then charge the customer. Details follow. "
              + " ".join(f"{MARKER}-detail-{i}" for i in range(30)))
PROVIDERS = {"openai": ("responses", "openai:gpt-test"), "anthropic": ("anthropic", "anthropic:claude-test")}


@dataclass
class Setup:
    tmp: Path
    server: DevServer
    fake: FakeLLMServer
    clients: dict[str, AgentClient]  # provider -> client bound to that worker's queue
    workers: dict[str, WorkerProc]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest_asyncio.fixture
async def setup(tmp_path: Path, fake_llm: FakeLLMServer) -> AsyncIterator[Setup]:
    for protocol, _ in PROVIDERS.values():
        for _ in range(3):  # one is enough (401 is not retried); spares in case
            key = OPENAI_KEY if protocol == "responses" else ANTHROPIC_KEY
            fake_llm.reply_error(protocol, 401, message=f"Incorrect API key provided: {key}. Check your key.")
    server = DevServer(db_file=tmp_path / "temporal.db", ui_port=None)
    await server.start_async()
    workers: dict[str, WorkerProc] = {}
    try:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DAGENT_", "OPENAI_", "ANTHROPIC_"))}
        base.update({
            "TEMPORAL_ADDRESS": server.address,
            "OPENAI_API_KEY": OPENAI_KEY,
            "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "OPENAI_BASE_URL": fake_llm.base_url("responses"),
            "ANTHROPIC_BASE_URL": fake_llm.base_url("anthropic"),
            "DAGENT_PLUGINS": "tests.support.ledger:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.support.ledger:model",
            "DAGENT_TEST_LEDGER": str(tmp_path / "ledger.jsonl"),
            "DAGENT_FILE_DIR": str(tmp_path / "files"),
            "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if p),
        })  # no DAGENT_LOG_LEVEL: the default level is what is checked
        queues = {name: f"secrets-{name}-{uuid.uuid4().hex[:6]}" for name in PROVIDERS}
        starts = [WorkerProc.start(f"worker-{name}", {**base, "DAGENT_TASK_QUEUE": queues[name],
                                                      "DAGENT_MODEL_HIGH": spec},
                                   tmp_path / f"worker-{name}.log")  # exec: python -m cli worker
                  for name, (_, spec) in PROVIDERS.items()]
        for name, worker in zip(PROVIDERS, await asyncio.gather(*starts), strict=True):
            workers[name] = worker
        await asyncio.gather(*(w.wait_ready(90) for w in workers.values()))
        settings = Settings(temporal_address=server.address, payload_dir=str(tmp_path / "payloads"))
        first = await AgentClient.connect(settings.model_copy(update={"task_queue": queues["openai"]}))
        clients = {name: AgentClient(first.client, settings.model_copy(update={"task_queue": queue}))
                   for name, queue in queues.items()}
        yield Setup(tmp=tmp_path, server=server, fake=fake_llm, clients=clients, workers=workers)
    finally:
        for worker in workers.values():
            await worker.kill()
        await asyncio.to_thread(server.kill)


def _pending(prompt: Prompt) -> ToolOutput:
    pending = [e for e in prompt.output if isinstance(e, ToolOutput) and isinstance(e.result, ApprovalRequest)]
    assert len(pending) == 1, prompt.output
    return pending[0]


async def _wait_pending(handle: PromptHandle) -> ToolOutput:
    prompt = await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 30)
    assert prompt.state == "waiting_for_approval", (prompt.state, prompt.error)
    return _pending(prompt)


def _found(haystack: bytes, needles: tuple[str, ...]) -> list[str]:
    return [needle for needle in needles if needle.encode() in haystack]


@pytest.mark.timeout(150)
async def test_no_secret_in_history_or_logs(setup: Setup) -> None:
    openai_client, anthropic_client = setup.clients["openai"], setup.clients["anthropic"]

    by_signal = await openai_client.start(LONG_INPUT, user_id="secrets")
    by_update = await anthropic_client.start(LONG_INPUT, user_id="secrets")
    await by_signal.approve((await _wait_pending(by_signal)).id, by="alice")
    resolved = await by_update.approve((await _wait_pending(by_update)).id, by="bob", wait=True)
    assert resolved is not None and resolved.result is not None and resolved.result.type == "success"
    failing = {name: await client.start("Say hello.", user_id="secrets", model="high")
               for name, client in setup.clients.items()}

    prompts = await asyncio.wait_for(asyncio.gather(by_signal.result(), by_update.result(),
                                                    *(h.result() for h in failing.values())), 60)
    assert [p.state for p in prompts[:2]] == ["completed", "completed"], [(p.state, p.error) for p in prompts]
    for name, prompt in zip(failing, prompts[2:], strict=True):
        assert prompt.state == "failed", (name, prompt.state, prompt.output)
        assert prompt.error and ("401" in prompt.error or "authenticat" in prompt.error.lower()), prompt.error
        assert not _found(prompt.model_dump_json().encode(), SECRETS), prompt.error

    # The keys really were sent (so a leak had something to leak) - and echoed back by the fake server.
    for (protocol, _), key in zip(PROVIDERS.values(), SECRETS, strict=True):
        requests = setup.fake.requests(protocol)  # type: ignore[arg-type]
        sent = [value for r in requests for value in r.headers.values() if key in value]
        assert sent, f"the {protocol} request did not carry the key: {[r.headers for r in requests]}"

    # Every workflow's full history: proto-JSON (what `temporal workflow show -o json` prints) and raw bytes.
    client = openai_client.client
    histories: dict[str, tuple[str, bytes]] = {}
    async for execution in client.list_workflows():
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        raw = b"".join(event.SerializeToString() for event in history.events)
        histories[execution.id] = (history.to_json(), raw)
        (setup.tmp / f"history-{execution.id}.json").write_text(histories[execution.id][0])
    assert {by_signal.id, by_update.id, *(h.id for h in failing.values())} <= set(histories)
    for workflow_id, (as_json, raw) in histories.items():
        assert not _found(as_json.encode(), SECRETS), f"API key in the history of {workflow_id} (JSON)"
        assert not _found(raw, SECRETS), f"API key in the history of {workflow_id} (payload bytes)"
    assert MARKER.encode() in histories[by_signal.id][1], "positive control: the input must be visible in history"

    # Every file the run wrote: logs, the server's database and log, payload store, ledger, history dumps.
    await asyncio.sleep(0.5)  # let the workers flush their last log lines
    files = [path for path in setup.tmp.rglob("*") if path.is_file()]
    leaks = {str(path.relative_to(setup.tmp)): hits for path in files if (hits := _found(path.read_bytes(), SECRETS))}
    assert not leaks, f"API keys found in files: {leaks}"
    database = b"".join(p.read_bytes() for p in files if p.name.startswith("temporal.db") and p.suffix != ".log")
    assert MARKER.encode() in database, "positive control: the input must be visible in the server's database"

    # Logs at the default level: activity lines (ids, the failure reason) are there, the user's input is not.
    for name, worker in setup.workers.items():
        log = worker.log_text()
        assert "model call failed" in log and failing[name].id in log, log[-2000:]
        assert MARKER not in log, f"the user input (a full payload) is in worker-{name}.log at the default level"
        assert not _found(log.encode(), SECRETS)
