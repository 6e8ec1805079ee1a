"""Payloads and files in one shared blob store: S3 through a real S3 API server (moto in server mode on
loopback), GCS through a GCS emulator (gcp-storage-emulator), and the failure modes of a store.

The main test is a multi-machine deployment in miniature: two worker processes with *different* local
directories and the shared S3 store take turns on one prompt with big payloads (the first is killed
mid-prompt while the prompt waits for approval), and a client with its own settings (a third "machine")
reads the record and the file a worker attached.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
import pytest_asyncio
from moto.server import ThreadedMotoServer
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ApprovalRequest, FileOutput, ToolOutput, ToolSuccess
from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.client import AgentClient
from durable_agent.config.storage.objects import StoreUnavailable
from durable_agent.config.storage.stores import check_store
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support import bigblobs
from tests.support.processes import DAGENT_CMD

ROOT = Path(__file__).resolve().parents[2]
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
THRESHOLD = 20_000  # payloads from 20 KB on go to the store, so every round's big data does
BIG_INPUT = "Please write the tides report. " + bigblobs.big_text("input", 90_000)


@dataclass
class S3:
    endpoint: str
    bucket: str

    def client(self) -> object:
        return boto3.client("s3", endpoint_url=self.endpoint, **_aws_kwargs())

    def keys(self) -> list[str]:
        listed = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket)  # type: ignore[attr-defined]
        return [item["Key"] for page in listed for item in page.get("Contents", [])]


def _aws_kwargs() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> S3:
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    bucket = f"dagent-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=moto_server, **_aws_kwargs()).create_bucket(Bucket=bucket)
    return S3(moto_server, bucket)


def _env(dev_env: WorkflowEnvironment, s3: S3, home: Path, task_queue: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DAGENT_", "TEMPORAL_"))}
    return {**base, **AWS_ENV,
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "TEMPORAL_CONFIG_FILE": str(home / "no-temporal.toml"),
            "DAGENT_TASK_QUEUE": task_queue, "DAGENT_STORE": f"s3://{s3.bucket}",
            "DAGENT_S3_ENDPOINT_URL": s3.endpoint, "DAGENT_PAYLOAD_THRESHOLD": str(THRESHOLD),
            "DAGENT_PAYLOAD_DIR": str(home / "payloads"), "DAGENT_FILE_DIR": str(home / "files"),
            "DAGENT_PLUGINS": "tests.support.bigblobs:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.support.bigblobs:model", "DAGENT_LOG_LEVEL": "WARNING",
            "DAGENT_WORKFLOW_SANDBOX": "strict"}


class WorkerProcess:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen([*DAGENT_CMD, "worker"], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=log.open("wb"))

    async def ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while "worker on" not in self.log.read_text(errors="replace"):
            assert self.proc.poll() is None, f"worker exited {self.proc.returncode}: {self.log.read_text()}"
            assert time.monotonic() < deadline, f"worker not ready: {self.log.read_text()}"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


@pytest_asyncio.fixture
async def processes() -> AsyncIterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.kill()


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


async def test_two_workers_take_turns_with_only_the_s3_store_shared(
        dev_env: WorkflowEnvironment, s3: S3, tmp_path: Path, processes: list[WorkerProcess]) -> None:
    queue = f"s3-{uuid.uuid4().hex[:8]}"
    homes = {name: tmp_path / name for name in ("a", "b", "client", "reader")}
    first = WorkerProcess(_env(dev_env, s3, homes["a"], queue), tmp_path / "a.log")
    processes.append(first)
    await first.ready()

    client_settings = Settings.from_env(_env(dev_env, s3, homes["client"], queue))
    client = await AgentClient.connect(client_settings)
    handle = await client.start(BIG_INPUT, user_id="tide-keeper")
    waiting = await handle.wait_until("waiting_for_approval")
    assert waiting.state == "waiting_for_approval", waiting.error

    pending = [o for o in waiting.output if isinstance(o, ToolOutput) and isinstance(o.result, ApprovalRequest)]
    assert [p.tool for p in pending] == ["blob.publish"]

    first.kill()  # mid-prompt: the next steps must run on the other machine
    second = WorkerProcess(_env(dev_env, s3, homes["b"], queue), tmp_path / "b.log")
    processes.append(second)
    await second.ready()
    await handle.approve(pending[0].id, by="tide-keeper")  # a signal: needs no live worker to be accepted
    done = await handle.result()
    assert done.state == "completed", done.error

    # a third machine with its own settings reads the record and the attached file
    reader = await AgentClient.connect(Settings.from_env(_env(dev_env, s3, homes["reader"], queue)))
    prompt = await reader.prompt(handle.id).get()
    assert prompt.input == BIG_INPUT and prompt.state == "completed"
    tools = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert [t.tool for t in tools] == ["blob.report", "blob.publish"]
    results = [t.result for t in tools]
    assert all(isinstance(r, ToolSuccess) and isinstance(r.output, dict) for r in results), str(results)[:500]
    pids = [r.output["pid"] for r in results]  # type: ignore[union-attr,index]
    assert pids == [first.proc.pid, second.proc.pid], "each worker should have run one of the tools"
    assert results[0].output["report"] == bigblobs.big_text("result:tides", bigblobs.REPORT_CHARS)  # type: ignore[union-attr,index]
    attached = next(o for o in prompt.output if isinstance(o, FileOutput))
    assert attached.content_ref.startswith(f"s3://{s3.bucket}/v0/ns/default/files/wi/{handle.id}/")
    content = await reader.read_file(attached.content_ref)
    assert content.decode() == bigblobs.big_text("file:tides", bigblobs.FILE_CHARS)

    # nothing was written to any machine's local directories; the bucket holds it, per workflow
    for home in homes.values():
        assert _files_under(home) == [], home
    keys = s3.keys()
    assert any(k.startswith(f"v0/ns/default/wt/PromptWorkflow/wi/{handle.id}/") for k in keys), keys
    assert any(k.startswith(f"v0/ns/default/files/wi/{handle.id}/") for k in keys), keys


def _s3_settings(dev_env: WorkflowEnvironment, s3: S3, tmp_path: Path, queue: str) -> Settings:
    return Settings.from_env(_env(dev_env, s3, tmp_path, queue))


async def test_missing_blob_fails_the_prompt_naming_store_and_key(
        dev_env: WorkflowEnvironment, s3: S3, tmp_path: Path) -> None:
    """The prompt's (big) input is deleted from the bucket before any worker reads it: the workflow fails
    for good with a reason that names the store and the key, instead of retrying its first task forever."""
    settings = _s3_settings(dev_env, s3, tmp_path, f"s3-missing-{uuid.uuid4().hex[:8]}")
    client = await AgentClient.connect(settings)
    handle = await client.start(BIG_INPUT)
    stored = [k for k in s3.keys() if f"/wi/{handle.id}/" in k]
    assert len(stored) == 1, stored
    s3.client().delete_object(Bucket=s3.bucket, Key=stored[0])  # type: ignore[attr-defined]

    model = ScriptedModel([text("never")])
    runtime = build_runtime(settings, plugins=[], providers={"normal": model, "high": model})
    async with create_worker(client.client, runtime, task_queue=settings.task_queue):
        with pytest.raises(WorkflowFailureError) as raised:
            await handle.workflow.result()
    cause = raised.value.cause
    message = str(getattr(cause, "message", cause))
    assert f"payload blob missing: store s3://{s3.bucket}" in message, message
    assert stored[0] in message
    assert getattr(cause, "type", None) == "PayloadBlobMissing"
    query = f"WorkflowId = '{handle.id}' AND ExecutionStatus = 'Failed'"
    failed = [w.id async for w in client.client.list_workflows(query)]
    assert failed == [handle.id]


async def test_unreachable_store_is_one_line_and_the_worker_refuses_to_start(
        dev_env: WorkflowEnvironment, s3: S3, tmp_path: Path) -> None:
    settings = _s3_settings(dev_env, s3, tmp_path, "unused")
    await check_store(settings.blob_objects())  # the real bucket passes

    no_bucket = settings.model_copy(update={"store": "s3://no-such-bucket-here"})
    with pytest.raises(StoreUnavailable, match=r"^blob store s3://no-such-bucket-here at http://127\.0\.0\.1:\d+ "
                                               r"cannot be used: .*NoSuchBucket"):
        await check_store(no_bucket.blob_objects())

    env = {**_env(dev_env, s3, tmp_path, "unused"), "DAGENT_S3_ENDPOINT_URL": "http://127.0.0.1:9"}
    run = await asyncio.to_thread(subprocess.run, [*DAGENT_CMD, "worker"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"error: blob store s3://{s3.bucket} at http://127.0.0.1:9 cannot be used:"), lines


async def test_gcs_store_round_trip(dev_env: WorkflowEnvironment, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """GCS through the SDK's gcsdriver against gcp-storage-emulator (a GCS JSON-API emulator on loopback):
    a prompt whose big input and tool output go through the bucket, and a file read back by the client."""
    from gcp_storage_emulator.server import create_server

    from tests.temporal.test_prompt_workflow import show_media

    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket="dagent-gcs")
    server.start()
    try:
        host, port = server._api._httpd.server_address[:2]  # the emulator has no public accessor
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://{host}:{port}")
        address = dev_env.client.service_client.config.target_host
        settings = Settings(store="gs://dagent-gcs", payload_threshold=THRESHOLD, temporal_address=address,
                            workflow_sandbox="strict",
                            task_queue=f"gcs-{uuid.uuid4().hex[:8]}", payload_dir=str(tmp_path / "p"),
                            file_dir=str(tmp_path / "f"))
        await check_store(settings.blob_objects())
        from durable_agent.agent.plugins import Plugin
        from durable_agent.agent.providers.scripted import tool_calls

        model = ScriptedModel([tool_calls(("media.show", {"note": "gcs " * 10_000})), text("shown")])
        runtime = build_runtime(settings, plugins=[Plugin("media", tools=[show_media])],
                                providers={"normal": model, "high": model})
        client = await AgentClient.connect(settings)
        async with create_worker(client.client, runtime, task_queue=settings.task_queue):
            prompt = await client.run(BIG_INPUT)
        assert prompt.state == "completed" and prompt.input == BIG_INPUT
        attached = next(o for o in prompt.output if isinstance(o, FileOutput))
        assert attached.content_ref.startswith("gs://dagent-gcs/v0/ns/default/files/wi/")
        assert await client.read_file(attached.content_ref) == ("gcs " * 10_000).encode()
        assert _files_under(tmp_path) == []
    finally:
        server.stop()


async def test_unreachable_store_makes_the_prompt_wait_with_the_reason_then_carry_on(
        dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The S3 server goes away after the client stored the prompt's input: the workflow task fails with a
    reason naming the store and the key (recorded in history) and retries; once the server is back on the
    same address, the prompt completes. Nothing is lost."""
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = S3(endpoint, f"dagent-{uuid.uuid4().hex[:10]}")
    boto3.client("s3", endpoint_url=endpoint, **_aws_kwargs()).create_bucket(Bucket=s3.bucket)
    settings = _s3_settings(dev_env, s3, tmp_path, f"s3-down-{uuid.uuid4().hex[:8]}")
    client = await AgentClient.connect(settings)
    handle = await client.start(BIG_INPUT)
    server.stop()  # moto keeps its buckets in this process: a new server on the port serves the same data

    model = ScriptedModel([text("made it")])
    runtime = build_runtime(settings, plugins=[], providers={"normal": model, "high": model})
    async with create_worker(client.client, runtime, task_queue=settings.task_queue):
        reason = ""
        for _ in range(600):
            history = await handle.workflow.fetch_history()
            failed = [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
            if failed:
                reason = failed[0].workflow_task_failed_event_attributes.failure.message
                break
            await asyncio.sleep(0.1)
        expected = f"payload store s3://{s3.bucket} at {endpoint}: cannot read key v0/ns/default/"
        assert reason.startswith(expected), reason
        assert f"/wi/{handle.id}/" in reason
        assert (await handle.workflow.describe()).status.name == "RUNNING"  # waiting, not failed
        restarted = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        restarted.start()
        try:
            prompt = await handle.result()
        finally:
            restarted.stop()
    assert prompt.state == "completed" and prompt.input == BIG_INPUT
