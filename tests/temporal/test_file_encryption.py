"""Files a tool attaches are encrypted with the payload codec's keys: neither the file directory nor an S3 bucket
(moto in server mode) holds the plaintext or its plain sha256, and reading back still works (review §5.3).
Real dev server, real worker, real prompts."""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from pydantic import BaseModel, SecretStr
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import FileOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.config.storage.codec import CodecKeyError, codec_for
from durable_agent.config.storage.files import BlobFileStore
from durable_agent.config.storage.local import DirectoryObjects
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker

SECRET = "FILESECRET-QQQ the quarterly numbers: 4711"
KEY_1 = base64.b64encode(b"\x01" * 32).decode()
KEY_2 = base64.b64encode(b"\x02" * 32).decode()
AWS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


class Report(BaseModel):
    title: str


@tool("report.attach")
async def attach(args: Report, ctx: ToolContext) -> str:
    """Attach a report file."""
    ctx.add_file(f"{args.title}.txt", SECRET, summary="the report")
    return "attached"


PLUGIN = Plugin("reports", tools=[attach])


def _model() -> ScriptedModel:
    return ScriptedModel([tool_calls(("report.attach", {"title": "q3"})), text("here it is")])


def _settings(dev_env: WorkflowEnvironment, tmp_path: Path, codec_keys: str | None, **extra: str) -> Settings:
    env = {"TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"), "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
           "DAGENT_FILE_DIR": str(tmp_path / "files"), "DAGENT_TASK_QUEUE": f"files-{uuid.uuid4().hex[:8]}", **extra}
    if codec_keys:
        env["DAGENT_CODEC_KEYS"] = codec_keys
    return Settings.from_env(env)


async def _attach_file(settings: Settings) -> tuple[AgentClient, FileOutput]:
    """Run a prompt whose tool attaches SECRET; the client and the file entry."""
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": _model(), "high": _model()})
    client = await AgentClient.connect(settings)
    async with create_worker(client.client, runtime, task_queue=settings.task_queue):
        prompt = await (await client.start("attach the report", user_id="alice")).result()
    assert prompt.state == "completed", prompt.error
    entry = next(o for o in prompt.output if isinstance(o, FileOutput))
    return client, entry


def _stored(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.name != ".store-id"]


async def test_files_on_disk_are_ciphertext_and_read_back(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    settings = _settings(dev_env, tmp_path, f"k1:{KEY_1}")
    client, entry = await _attach_file(settings)
    plain_sha = hashlib.sha256(SECRET.encode()).hexdigest()
    files = _stored(tmp_path / "files")
    assert files, "the file should be in the file directory"
    for path in files:
        assert SECRET.encode() not in path.read_bytes() and b"FILESECRET" not in path.read_bytes(), path
        assert plain_sha not in str(path), path  # its name says nothing about the content to a guesser
    assert plain_sha not in entry.content_ref and "/d/hmac-sha256/k1/" in entry.content_ref
    assert entry.size == len(SECRET)
    assert await client.read_file(entry.content_ref) == SECRET.encode()  # the client reads it decrypted
    # A process without the key gets a clear one-line error, not the bytes.
    plain_store = settings.model_copy(update={"codec_keys": None}).file_store()
    with pytest.raises(CodecKeyError, match="is encrypted: this process needs DAGENT_CODEC_KEYS"):
        await plain_store.aget(entry.content_ref)
    # Positive control: without the codec the same scan finds the plaintext (so the scan above can see it).
    control_dir = tmp_path / "control"
    _, plain_entry = await _attach_file(_settings(dev_env, control_dir, None))
    assert any(SECRET.encode() in p.read_bytes() for p in _stored(control_dir / "files"))
    assert plain_entry.content_ref.endswith(plain_sha)


async def test_rotation_dedup_within_a_key_and_tampering(tmp_path: Path) -> None:
    objects = DirectoryObjects(tmp_path / "store")
    old = BlobFileStore(objects, codec=codec_for(f"k1:{KEY_1}")).scoped("default", "wf-1")
    ref = await old.aput("a.txt", SECRET.encode(), "text/plain")
    assert await old.aput("a.txt", SECRET.encode(), "text/plain") == ref  # a retried write: the same object
    assert len(_stored(tmp_path / "store")) == 1
    # Rotated: k2 active, k1 still listed. New writes use k2 (another object); the k1 file still reads.
    rotated = BlobFileStore(objects, codec=codec_for(f"k2:{KEY_2},k1:{KEY_1}")).scoped("default", "wf-1")
    ref2 = await rotated.aput("a.txt", SECRET.encode(), "text/plain")
    assert ref2 != ref and "/k2/" in ref2 and await rotated.aget(ref) == SECRET.encode()
    # Without k1 the old file names the missing key id.
    only_new = BlobFileStore(objects, codec=codec_for(f"k2:{KEY_2}"))
    with pytest.raises(CodecKeyError, match="key id 'k1'"):
        await only_new.aget(ref)
    # A sealed object copied under another object's key does not open (the ciphertext is bound to its key).
    other = await old.aput("b.txt", b"another file", "text/plain")
    source, target = (tmp_path / "store" / r.removeprefix("dir:") for r in (ref, other))
    target.write_bytes(source.read_bytes())
    with pytest.raises(CodecKeyError, match="does not decrypt"):
        await old.aget(other)
    # An unencrypted file written before the codec was switched on still reads, and is checked against its hash.
    legacy = await BlobFileStore(objects).scoped("default", "wf-0").aput("c.txt", b"old file", "text/plain")
    assert await old.aget(legacy) == b"old file"
    (tmp_path / "store" / legacy.removeprefix("dir:")).write_bytes(b"swapped")
    with pytest.raises(CodecKeyError, match="does not match its sha256"):
        await old.aget(legacy)


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint, name = f"http://{host}:{port}", f"dagent-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=endpoint, **AWS).create_bucket(Bucket=name)
    yield endpoint, name
    server.stop()


async def test_files_in_s3_are_ciphertext(dev_env: WorkflowEnvironment, tmp_path: Path,
                                          bucket: tuple[str, str]) -> None:
    endpoint, name = bucket
    settings = _settings(dev_env, tmp_path, f"k1:{KEY_1}", DAGENT_STORE=f"s3://{name}",
                         DAGENT_S3_ENDPOINT_URL=endpoint)
    client, entry = await _attach_file(settings)
    s3 = boto3.client("s3", endpoint_url=endpoint, **AWS)
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=name).get("Contents", [])]
    file_keys = [k for k in keys if "/files/" in k]
    assert file_keys and entry.content_ref == f"s3://{name}/{file_keys[0]}", (keys, entry.content_ref)
    plain_sha = hashlib.sha256(SECRET.encode()).hexdigest()
    for key in keys:
        body = s3.get_object(Bucket=name, Key=key)["Body"].read()
        assert b"FILESECRET" not in body and plain_sha not in key, key
    assert await client.read_file(entry.content_ref) == SECRET.encode()
    assert settings.codec_keys == SecretStr(f"k1:{KEY_1}")
