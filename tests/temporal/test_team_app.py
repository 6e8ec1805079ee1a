"""Inside a Temporal team's own system (issue 40): an application outside the package, with its own payload codec,
its own workflow that needs a sandbox passthrough and its own `temporalio.worker.Worker`, our plugin on its client.

Every payload of a prompt's history is in the team's encoding; the team's workflow and a prompt with an
approval complete on that one worker; a versioned deploy of that worker keeps a waiting prompt on its build."""

from __future__ import annotations

import asyncio
import importlib
import re
import secrets
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerDeploymentConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agent import AgentClient, DurableAgentPlugin, ScriptedModel, Settings, build_runtime, text, tool_calls
from durable_agent.agent.models import ToolOutput
from durable_agent.workers.versioning import DeploymentError, UnversionedWorkflow, set_current_version
from tests.support.team_app import write_team_app


@pytest.fixture
def team(tmp_path: Path) -> Iterator[dict[str, ModuleType]]:
    root = write_team_app(tmp_path / "team")
    sys.path.insert(0, str(root))
    try:
        yield {name: importlib.import_module(f"teamapp.{name}") for name in ("codec", "workflows", "tools")}
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n == "teamlib" or n.split(".")[0] == "teamapp"]:
            del sys.modules[name]


TEAM_ENCODING = b"binary/team-zlib"


def _settings(tmp_path: Path, **update: Any) -> Settings:
    return Settings(task_queue=f"team-{uuid.uuid4().hex[:8]}", payload_dir=str(tmp_path / "payloads"),
                    file_dir=str(tmp_path / "files"), payload_threshold=2048, **update)


def _model() -> ScriptedModel:
    return ScriptedModel([tool_calls(("payment.send", {"invoice_id": "INV-2"})), text("paid INV-2")])


def _team_client(env: WorkflowEnvironment, team: dict[str, ModuleType], plugin: DurableAgentPlugin) -> Client:
    return Client(env.client.service_client, namespace=env.client.namespace,
                  data_converter=DataConverter(payload_codec=team["codec"].TeamCodec()), plugins=[plugin])


def _team_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("teamlib"))


def _payloads(message: Message, path: str = "") -> Iterator[tuple[str, Payload]]:
    """Every Payload inside a history event, with where it is; search attributes are left out (Temporal indexes
    them, so no SDK encodes them with a codec)."""
    for field, value in message.ListFields():
        where = f"{path}.{field.name}"
        if field.name == "search_attributes":
            continue
        if isinstance(value, Message):
            items: Any = [value]
        elif isinstance(value, (str, bytes, int, float)):
            continue
        else:  # a repeated field or a map
            items = value.values() if hasattr(value, "values") else value
        for item in items:
            if isinstance(item, Payload):
                yield where, item
            elif isinstance(item, Message):
                yield from _payloads(item, where)


async def test_a_team_worker_runs_its_workflow_and_a_prompt_in_its_own_encoding(
        dev_env: WorkflowEnvironment, team: dict[str, ModuleType], tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    runtime = build_runtime(settings, plugins=[team["tools"].plugin], providers={"normal": _model()})
    client = _team_client(dev_env, team, DurableAgentPlugin(settings, runtime=runtime))
    assert isinstance(client.data_converter.payload_codec, team["codec"].TeamCodec)
    worker = Worker(client, task_queue=settings.task_queue, workflows=[team["workflows"].PayInvoiceWorkflow],
                    activities=[team["workflows"].lookup_invoice], workflow_runner=_team_runner())
    async with worker:
        theirs = await asyncio.wait_for(client.execute_workflow(
            "PayInvoiceWorkflow", "INV-3", id=f"team-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue), 30)
        agents = AgentClient(client, settings)
        reference = secrets.token_hex(4000)  # above the threshold even after the team's compression
        handle = await agents.start(f"Pay invoice INV-2 {reference}", user_id="ann")
        waiting = await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 30)
        call = next(e for e in waiting.output if isinstance(e, ToolOutput))
        await handle.approve(call.id, by="fiona", roles=["finance"], wait=True)
        prompt = await asyncio.wait_for(handle.result(), 30)

    assert theirs == "INV-3: 105"
    assert prompt.state == "completed" and prompt.output[-1].text == "paid INV-2"  # type: ignore[union-attr]
    history = await client.get_workflow_handle(handle.id).fetch_history()
    payloads = [(f"{event.event_id}:{event.WhichOneof('attributes')}{where}", payload)
                for event in history.events for where, payload in _payloads(event)]
    assert len(payloads) > 10
    # Temporal 1.35 writes an external-storage reference (a driver name and a key, no data) as is; the payload
    # it points to is stored as the team's codec left it.
    plain = [where for where, payload in payloads if payload.metadata.get("encoding") != TEAM_ENCODING
             and payload.metadata.get("messageType") != b"temporal.api.sdk.v1.ExternalStorageReference"]
    assert plain == [], "payloads in history not in the team's encoding"
    assert any(payload.metadata.get("messageType") for _, payload in payloads), "nothing went to the blob store"
    stored = [Payload.FromString(blob.read_bytes()) for blob in (tmp_path / "payloads").rglob("*")
              if blob.is_file() and re.fullmatch("[0-9a-f]{64}", blob.name)]
    assert stored and {payload.metadata["encoding"] for payload in stored} == {TEAM_ENCODING}


async def test_the_team_runner_keeps_its_passthrough_and_a_plain_one_refuses_the_team_workflow(
        dev_env: WorkflowEnvironment, team: dict[str, ModuleType], tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    client = _team_client(dev_env, team, DurableAgentPlugin(settings))
    worker = Worker(client, task_queue=settings.task_queue, workflows=[team["workflows"].PayInvoiceWorkflow],
                    workflow_runner=_team_runner())
    restrictions = worker.config(active_config=True)["workflow_runner"].inner.restrictions  # type: ignore[attr-defined]
    assert {"teamlib", "durable_agent"} <= restrictions.passthrough_modules
    with pytest.raises(RuntimeError, match="PayInvoiceWorkflow"):  # the test itself needs the passthrough
        Worker(client, task_queue=settings.task_queue, workflows=[team["workflows"].PayInvoiceWorkflow])


async def test_an_unannotated_team_workflow_on_a_versioned_worker_is_one_line_naming_the_options(
        dev_env: WorkflowEnvironment, team: dict[str, ModuleType], tmp_path: Path) -> None:
    unannotated = team["workflows"].PayInvoiceWorkflow
    settings = _settings(tmp_path, deployment_name="team", build_id="v1")
    client = _team_client(dev_env, team, DurableAgentPlugin(settings))
    with pytest.raises(UnversionedWorkflow) as refused:
        Worker(client, task_queue=settings.task_queue, workflows=[unannotated], workflow_runner=_team_runner())
    message = str(refused.value)
    assert "\n" not in message and "PayInvoiceWorkflow" in message
    assert "versioning_behavior" in message and "default_versioning_behavior" in message
    unversioned = _settings(tmp_path)  # and the other way round: a declared behavior on an unversioned worker
    with pytest.raises(UnversionedWorkflow, match="PayInvoiceWorkflow declares versioning behavior AUTO_UPGRADE"):
        Worker(_team_client(dev_env, team, DurableAgentPlugin(unversioned)), task_queue=unversioned.task_queue,
               workflows=[team["workflows"].VersionedPayInvoiceWorkflow], workflow_runner=_team_runner())
    # The team's own deployment config, with a default behavior, is kept and accepted.
    version = WorkerDeploymentVersion(deployment_name="team", build_id="v1")
    worker = Worker(client, task_queue=settings.task_queue, workflows=[unannotated], workflow_runner=_team_runner(),
                    deployment_config=WorkerDeploymentConfig(
                        version=version, use_worker_versioning=True,
                        default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE))
    assert worker.config(active_config=True)["deployment_config"].version == version  # type: ignore[union-attr]


async def _eventually(step: Callable[[], Awaitable[None]], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await step()
            return
        except DeploymentError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_a_versioned_deploy_of_the_team_worker_keeps_a_waiting_prompt_on_its_build(
        dev_env: WorkflowEnvironment, team: dict[str, ModuleType], tmp_path: Path) -> None:
    name = f"team-{uuid.uuid4().hex[:8]}"
    v1 = _settings(tmp_path, deployment_name=name, build_id="v1")
    v2 = v1.model_copy(update={"build_id": "v2"})

    def worker(settings: Settings, identity: str) -> Worker:
        runtime = build_runtime(settings, plugins=[team["tools"].plugin], providers={"normal": _model()})
        client = _team_client(dev_env, team, DurableAgentPlugin(settings, runtime=runtime))
        return Worker(client, task_queue=settings.task_queue,
                      workflows=[team["workflows"].VersionedPayInvoiceWorkflow],
                      activities=[team["workflows"].lookup_invoice], workflow_runner=_team_runner(),
                      identity=identity)

    agents = AgentClient(_team_client(dev_env, team, DurableAgentPlugin(v1)), v1)
    async with worker(v1, "team-v1"):
        await _eventually(lambda: set_current_version(dev_env.client, name, "v1"))
        handle = await agents.start("Pay invoice INV-2", user_id="ann")
        waiting = await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 30)
        call = next(e for e in waiting.output if isinstance(e, ToolOutput))
        async with worker(v2, "team-v2"):
            await _eventually(lambda: set_current_version(dev_env.client, name, "v2"))
            await handle.approve(call.id, by="fiona", roles=["finance"])
            prompt = await asyncio.wait_for(handle.result(), 30)
            description = await agents.client.get_workflow_handle(handle.id).describe()

    assert prompt.state == "completed", prompt.error
    info = description.raw_description.workflow_execution_info.versioning_info
    assert info.deployment_version.build_id == "v1"
    history = await agents.client.get_workflow_handle(handle.id).fetch_history()
    identities = {e.workflow_task_completed_event_attributes.identity for e in history.events
                  if e.HasField("workflow_task_completed_event_attributes")}
    assert identities == {"team-v1"}, "every workflow task of the pinned prompt ran on the v1 worker"
