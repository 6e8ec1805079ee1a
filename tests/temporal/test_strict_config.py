"""Strict configuration: `dagent api` and `dagent worker` (real processes) refuse to start, in one line that shows
no key, when their configuration would accept more than it says (review security-turn3 §1.9, 1.12, 1.13)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from temporalio.testing import WorkflowEnvironment

from durable_agent.cli.devserver import free_port
from tests.support.api import key_pair
from tests.support.processes import DAGENT_CMD, REPO_ROOT, WorkerProcess


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGENT_", "TEMPORAL_"))}
    env.update({"DAGENT_FILE_DIR": str(tmp_path / "files"), "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"),
                "TEMPORAL_ADDRESS": "127.0.0.1:1", "DAGENT_TASK_QUEUE": f"strict-{tmp_path.name}",
                "PYTHONPATH": str(REPO_ROOT)})
    env.update(extra)
    return env


async def _refused(args: list[str], env: dict[str, str]) -> str:
    """Run `dagent <args>`: it must exit with an error within 60 s; its stderr (one line) is returned."""
    proc = await asyncio.create_subprocess_exec(*DAGENT_CMD, *args, env=env, cwd=REPO_ROOT,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"dagent {' '.join(args)} kept running: it did not refuse its configuration") from None
    assert proc.returncode not in (0, None), (proc.returncode, out, err)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err.decode()
    return lines[0]


def _rsa_private_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


async def test_api_refuses_oidc_without_issuer_and_audience(tmp_path: Path) -> None:
    port = str(free_port("127.0.0.1"))
    only_jwks = _env(tmp_path, DAGENT_OIDC_JWKS_URL="http://127.0.0.1:9/jwks.json")
    line = await _refused(["api", "--port", port], only_jwks)
    assert "OIDC needs issuer and audience" in line, line
    line = await _refused(["api", "--port", port], {**only_jwks, "DAGENT_OIDC_ISSUER": "https://issuer.test/"})
    assert "OIDC needs audience" in line and "DAGENT_OIDC_AUDIENCE" in line, line
    config = tmp_path / "api.toml"
    config.write_text('[oidc]\njwks_url = "http://127.0.0.1:9/jwks.json"\naudience = "durable-agent"\n')
    line = await _refused(["api", "--port", port, "--config", str(config)], _env(tmp_path))
    assert "OIDC needs issuer" in line and str(config) in line, line


async def test_api_refuses_a_decision_private_key_that_cannot_sign(tmp_path: Path) -> None:
    port = str(free_port("127.0.0.1"))
    garbage = "-----BEGIN PRIVATE KEY-----\nTUFMRk9STUVELUtFWS1NQVRFUklBTA==\n-----END PRIVATE KEY-----\n"
    line = await _refused(["api", "--port", port], _env(tmp_path, DAGENT_DECISION_PRIVATE_KEY=garbage))
    assert "decision private key" in line and "not a PEM private key" in line, line
    assert "TUFMRk9STUVE" not in line  # never the key material
    rsa_pem = _rsa_private_pem()
    key_file = tmp_path / "rsa.pem"
    key_file.write_text(rsa_pem)
    line = await _refused(["api", "--port", port], _env(tmp_path, DAGENT_DECISION_PRIVATE_KEY_FILE=str(key_file)))
    assert "must be Ed25519" in line and "BEGIN" not in line, line
    public_pem = key_pair()[1]  # a public key where the private one belongs
    line = await _refused(["api", "--port", port], _env(tmp_path, DAGENT_DECISION_PRIVATE_KEY=public_pem))
    assert "decision private key" in line and "BEGIN" not in line, line


async def test_api_with_valid_strict_config_serves(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    port = free_port("127.0.0.1")
    config = tmp_path / "api.toml"
    config.write_text('[oidc]\njwks_url = "http://127.0.0.1:9/jwks.json"\nissuer = "https://issuer.test/"\n'
                      'audience = "durable-agent"\n[[api_keys]]\nprincipal = "alice"\nkey = "alice-key-0123456789ab"\n')
    env = _env(tmp_path, DAGENT_DECISION_PRIVATE_KEY=key_pair()[0], TEMPORAL_ADDRESS=dev_env.client.service_client
               .config.target_host)
    log = (tmp_path / "api.log").open("wb")
    proc = await asyncio.create_subprocess_exec(*DAGENT_CMD, "api", "--port", str(port), "--config", str(config),
                                                env=env, cwd=REPO_ROOT, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            while True:
                assert proc.returncode is None, (tmp_path / "api.log").read_text()
                try:
                    me = await http.get("/me", headers={"Authorization": "Bearer alice-key-0123456789ab"})
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, (tmp_path / "api.log").read_text()
                    await asyncio.sleep(0.3)
        assert me.status_code == 200 and me.json()["id"] == "alice", me.text
    finally:
        proc.terminate()
        await proc.wait()
        log.close()


async def test_worker_refuses_unsigned_decisions_when_the_fleet_signs(tmp_path: Path) -> None:
    line = await _refused(["worker"], _env(tmp_path, DAGENT_DECISIONS="signed"))
    assert "DAGENT_DECISIONS=signed" in line and "DAGENT_DECISION_PUBLIC_KEY" in line, line
    line = await _refused(["worker"], _env(tmp_path, DAGENT_DECISIONS="signed",
                                           DAGENT_DECISION_PUBLIC_KEY="-----BEGIN PUBLIC KEY-----\nAAAA\n"
                                                                      "-----END PUBLIC KEY-----\n"))
    assert "DAGENT_DECISION_PUBLIC_KEY is not a PEM public key" in line, line
    line = await _refused(["worker"], _env(tmp_path, DAGENT_DECISIONS="sometimes"))
    assert "DAGENT_DECISIONS must be open or signed" in line, line


async def test_worker_with_the_public_key_starts_in_signed_mode(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    env = _env(tmp_path, DAGENT_DECISIONS="signed", DAGENT_DECISION_PUBLIC_KEY=key_pair()[1],
               TEMPORAL_ADDRESS=dev_env.client.service_client.config.target_host)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 90
        while not worker.ready():
            assert time.monotonic() < deadline, worker.log()
            await asyncio.sleep(0.3)
    finally:
        worker.kill()


async def test_a_signing_api_says_when_a_call_accepts_unsigned_decisions(dev_env: WorkflowEnvironment) -> None:
    """The fleet mismatch the worker flag prevents (API signs, the planning worker had no public key) is visible."""
    from durable_agent.api import create_app
    from durable_agent.api.server import serve_in_background
    from tests.support.api import PLUGIN, api_config, auth, web_model
    from tests.support.logs import capture_logs
    from tests.support.workers import agent_worker

    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model(), decision_key=None) as agent, \
            serve_in_background(create_app(agent, api_config(key_pair()[0]))) as url, \
            httpx.AsyncClient(base_url=url, headers=auth("alice"), timeout=60) as http:
        prompt_id = (await http.post("/prompts", json={"input": "pay bob 250"})).json()["id"]
        prompt = await agent.prompt(prompt_id).wait_until("waiting_for_approval")
        with capture_logs() as logs:
            decided = await http.post(f"/prompts/{prompt_id}/approvals/{prompt.output[1].id}/approve")
        assert decided.status_code == 200, decided.text
    warning = [e for e in logs if e["event"] == "decision on a call that does not require signed decisions"]
    assert warning and warning[0]["prompt_id"] == prompt_id and "DAGENT_DECISIONS=signed" in warning[0]["fix"]
