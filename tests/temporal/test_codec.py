"""The AES-GCM payload codec and `dagent codec-server`: no prompt text in history or in the blob store, and
the `temporal` CLI and the Temporal UI (headless Chromium from Debian's packages) still show it decoded."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from temporalio.api.common.v1 import Payload
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.cli.devserver import DevServer
from durable_agent.cli.devserver.binaries import temporal_cli_path
from durable_agent.client import AgentClient
from durable_agent.config.storage.codec import AESGCMCodec, CodecKeyError, codec_from_env, parse_keys
from durable_agent.config.storage.codec_server import serve
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.temporal.test_prompt_workflow import math_plugin

ROOT = Path(__file__).resolve().parents[2]
MARKER = "walrus-ember-93kq"
KEY_1 = base64.b64encode(b"1" * 32).decode()
KEY_2 = base64.b64encode(b"2" * 32).decode()
TOKEN = "codec-token-for-tests"


def _codec_env(active: str = "k2") -> dict[str, str]:
    return {"DAGENT_CODEC_KEYS": f"k2:{KEY_2},k1:{KEY_1}", "DAGENT_CODEC_KEY_ID": active}


def _big_input() -> str:
    return f"{MARKER}: summarise this. " + " ".join(f"{MARKER}-{i}" for i in range(3_500))


# --- the codec alone ---------------------------------------------------------------------------------


async def test_round_trip_key_id_and_rotation() -> None:
    old = codec_from_env({"DAGENT_CODEC_KEYS": f"k1:{KEY_1}"})
    assert old is not None
    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(MARKER).encode())
    [sealed] = await old.encode([plain])
    assert sealed.metadata["encryption-key-id"] == b"k1" and MARKER.encode() not in sealed.SerializeToString()
    # rotated: k2 is active, k1 still decrypts what it wrote
    rotated = codec_from_env(_codec_env("k2"))
    assert rotated is not None and rotated.active_key_id == "k2"
    assert (await rotated.decode([sealed]))[0] == plain
    assert (await rotated.encode([plain]))[0].metadata["encryption-key-id"] == b"k2"
    # a process without k1 says which key is missing
    only_new = AESGCMCodec(parse_keys(f"k2:{KEY_2}"), "k2")
    with pytest.raises(CodecKeyError, match="key id 'k1', which is not in DAGENT_CODEC_KEYS"):
        await only_new.decode([sealed])
    # unencrypted payloads (written before the codec was switched on) pass through
    assert (await only_new.decode([plain]))[0] == plain


def test_bad_key_configuration_is_one_line_without_key_material() -> None:
    with pytest.raises(CodecKeyError, match="must be 32 bytes"):
        parse_keys(f"k1:{base64.b64encode(b'short').decode()}")
    with pytest.raises(CodecKeyError, match="not valid base64"):
        parse_keys("k1:not base64!")
    with pytest.raises(CodecKeyError, match="DAGENT_CODEC_KEY_ID 'k9' is not one of"):
        codec_from_env({**_codec_env(), "DAGENT_CODEC_KEY_ID": "k9"})
    assert codec_from_env({}) is None


# --- a prompt with the codec on ----------------------------------------------------------------------


def _settings(dev_env: WorkflowEnvironment, tmp_path: Path) -> Settings:
    env = {**_codec_env(), "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"), "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
           "DAGENT_FILE_DIR": str(tmp_path / "files"), "DAGENT_PAYLOAD_THRESHOLD": "20000",
           "DAGENT_WORKFLOW_SANDBOX": "strict",
           "DAGENT_TASK_QUEUE": f"codec-{uuid.uuid4().hex[:8]}"}
    return Settings.from_env(env)


async def _run_prompt(settings: Settings, input_text: str) -> tuple[AgentClient, str, str]:
    model = ScriptedModel([text(f"done with {MARKER}")])
    runtime = build_runtime(settings, plugins=[math_plugin], providers={"normal": model, "high": model})
    client = await AgentClient.connect(settings)
    async with create_worker(client.client, runtime, task_queue=settings.task_queue):
        handle = await client.start(input_text, user_id="codec-user")
        prompt = await handle.result()
    assert prompt.state == "completed" and prompt.input == input_text  # the client reads it decrypted
    description = await handle.workflow.describe()
    return client, handle.id, description.run_id


async def test_no_prompt_text_in_history_or_blob_store(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    settings = _settings(dev_env, tmp_path)
    client, prompt_id, _ = await _run_prompt(settings, _big_input())
    history = await client.client.get_workflow_handle(prompt_id).fetch_history()
    raw = history.to_json() + "".join(base64.b64encode(e.SerializeToString()).decode() for e in history.events)
    raw_bytes = b"".join(e.SerializeToString() for e in history.events)
    assert MARKER not in raw and MARKER.encode() not in raw_bytes
    blobs = [p for p in (tmp_path / "payloads").rglob("*") if p.is_file() and p.name != ".store-id"]
    assert blobs, "the big input should have gone to the blob store"
    assert not any(MARKER.encode() in p.read_bytes() for p in blobs)
    # positive control: without the codec the same search finds the text in history
    plain = settings.model_copy(update={"codec_keys": None})
    plain_client, plain_id, _ = await _run_prompt(plain, f"{MARKER} short and plain")
    plain_history = await plain_client.client.get_workflow_handle(plain_id).fetch_history()
    assert MARKER in plain_history.to_json() or MARKER.encode() in b"".join(
        e.SerializeToString() for e in plain_history.events)


# --- the codec server: HTTP, the temporal CLI, the UI -------------------------------------------------


@pytest_asyncio.fixture
async def codec_server() -> AsyncIterator[str]:
    codec = codec_from_env(_codec_env())
    assert codec is not None
    runner = await serve(codec, host="127.0.0.1", port=0, origins=["http://localhost:8233"], auth_token=TOKEN)
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}"
    await runner.cleanup()


async def test_codec_server_protocol_cors_and_auth(codec_server: str) -> None:
    codec = codec_from_env(_codec_env())
    assert codec is not None
    sealed = codec.encode_one(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(MARKER).encode()))
    body = {"payloads": [{"metadata": {k: base64.b64encode(v).decode() for k, v in sealed.metadata.items()},
                          "data": base64.b64encode(sealed.data).decode()}]}
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default"}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{codec_server}/decode", json=body, headers=auth) as response:
            assert response.status == 200
            decoded = (await response.json())["payloads"][0]
        assert base64.b64decode(decoded["data"]) == json.dumps(MARKER).encode()
        assert base64.b64decode(decoded["metadata"]["encoding"]) == b"json/plain"
        async with http.post(f"{codec_server}/encode", json={"payloads": [decoded]}, headers=auth) as response:
            encoded = (await response.json())["payloads"][0]
        assert base64.b64decode(encoded["metadata"]["encryption-key-id"]) == b"k2"
        assert MARKER.encode() not in base64.b64decode(encoded["data"])
        # auth: missing or wrong token
        async with http.post(f"{codec_server}/decode", json=body) as response:
            assert response.status == 401
        async with http.post(f"{codec_server}/decode", json=body, headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401
        # CORS: the UI origin gets the headers (preflight without credentials), another origin does not
        preflight = {"Origin": "http://localhost:8233", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "content-type,x-namespace,authorization"}
        async with http.options(f"{codec_server}/decode", headers=preflight) as response:
            assert response.status == 204
            assert response.headers["Access-Control-Allow-Origin"] == "http://localhost:8233"
            assert "x-namespace" in response.headers["Access-Control-Allow-Headers"].lower()
        async with http.options(f"{codec_server}/decode", headers={**preflight, "Origin": "http://evil.test"}) as r:
            assert "Access-Control-Allow-Origin" not in r.headers


async def test_temporal_cli_prints_decoded_input(dev_env: WorkflowEnvironment, tmp_path: Path,
                                                 codec_server: str) -> None:
    settings = _settings(dev_env, tmp_path)
    _, prompt_id, _ = await _run_prompt(settings, f"{MARKER} for the CLI")
    base = [temporal_cli_path(), "workflow", "show", "-w", prompt_id, "--address", settings.temporal_address,
            "--detailed"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, env=env, check=False)

    without = await asyncio.to_thread(cli)
    assert without.returncode == 0 and MARKER not in without.stdout  # control: encrypted as stored
    shown = await asyncio.to_thread(cli, "--codec-endpoint", codec_server, "--codec-auth", f"Bearer {TOKEN}")
    assert shown.returncode == 0, shown.stderr
    assert f"{MARKER} for the CLI" in shown.stdout
    refused = await asyncio.to_thread(cli, "--codec-endpoint", codec_server)
    assert MARKER not in refused.stdout  # no token, no plaintext


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if "CI" in os.environ:
            pytest.fail("chromium is missing (scripts/test installs it)")
        pytest.skip("chromium is not installed (scripts/test installs it)")
    return found


async def test_temporal_ui_shows_decoded_input(tmp_path: Path) -> None:
    """The dev server's UI, configured with the codec endpoint, opened in headless Chromium."""
    chromium = _chromium()
    codec = codec_from_env(_codec_env())
    assert codec is not None
    ui_port = _free_port()
    runner = await serve(codec, host="127.0.0.1", port=0, origins=[f"http://localhost:{ui_port}"], auth_token=None)
    try:
        host, port = runner.addresses[0][:2]
        async with DevServer(ui_port=ui_port, log_file=tmp_path / "server.log",
                             extra_args=["--ui-codec-endpoint", f"http://{host}:{port}"]) as server:
            settings = Settings.from_env({**_codec_env(), "TEMPORAL_ADDRESS": server.address,
                                          "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"),
                                          "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
                                          "DAGENT_TASK_QUEUE": "codec-ui", "DAGENT_WORKFLOW_SANDBOX": "strict"})
            _, prompt_id, run_id = await _run_prompt(settings, f"{MARKER} in the browser")
            url = f"{server.ui_url}/namespaces/default/workflows/{prompt_id}/{run_id}/history"
            dom = await asyncio.to_thread(_dump_dom, chromium, url)
    finally:
        await runner.cleanup()
    assert prompt_id in dom, dom[:2000]
    assert f"{MARKER} in the browser" in dom


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dump_dom(chromium: str, url: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1400,1000", "--virtual-time-budget=15000",
             "--dump-dom", url],
            capture_output=True, text=True, timeout=120, check=False)
    return run.stdout


