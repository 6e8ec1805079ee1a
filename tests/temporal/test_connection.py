"""Connecting through `temporalio.envconfig`: profiles, TLS, mTLS, API key, and one-line errors.

The dev server cannot serve TLS, so a TLS-terminating proxy (tests/support/tls_proxy.py, certificates from
`trustme`) sits in front of it; a worker and a client complete a prompt through the proxy. The proxy also
decodes the gRPC request headers it forwards, which shows the API key really reaches the server side.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import trustme
from temporalio.service import GrpcCompression
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.client import AgentClient
from durable_agent.config.connection import TemporalConnectError, describe_security, grpc_compression, is_loopback
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, connect, create_worker
from tests.support.processes import DAGENT_CMD
from tests.support.tls_proxy import TLSProxy, server_context
from tests.support.workers import TEST_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Pki:
    ca_pem: Path
    other_ca_pem: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pki, trustme.CA, trustme.LeafCert]:
    tmp = tmp_path_factory.mktemp("pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    server_cert = ca.issue_cert("localhost", "127.0.0.1")
    client_cert = ca.issue_cert("dagent-worker@example.test")
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    other_ca.cert_pem.write_to_path(str(tmp / "other-ca.pem"))
    client_cert.cert_chain_pems[0].write_to_path(str(tmp / "client.pem"))
    client_cert.private_key_pem.write_to_path(str(tmp / "client.key"))
    return Pki(tmp / "ca.pem", tmp / "other-ca.pem", tmp / "client.pem", tmp / "client.key"), ca, server_cert


def _upstream(env: WorkflowEnvironment) -> tuple[str, int]:
    host, port = env.client.service_client.config.target_host.rsplit(":", 1)
    return host, int(port)


@pytest_asyncio.fixture
async def tls_proxy(dev_env: WorkflowEnvironment, pki: tuple[Pki, trustme.CA, trustme.LeafCert]
                    ) -> AsyncIterator[TLSProxy]:
    _, _, cert = pki
    async with TLSProxy(server_context(cert), *_upstream(dev_env)) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def mtls_proxy(dev_env: WorkflowEnvironment, pki: tuple[Pki, trustme.CA, trustme.LeafCert]
                     ) -> AsyncIterator[TLSProxy]:
    _, ca, cert = pki
    async with TLSProxy(server_context(cert, client_ca=ca), *_upstream(dev_env)) as proxy:
        yield proxy


def _settings(env: dict[str, str], **update: object) -> Settings:
    base = TEST_SETTINGS.model_dump()
    loaded = Settings.from_env({"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml", **env})
    return Settings(**{**base, "temporal_address": loaded.temporal_address, "namespace": loaded.namespace,
                       "temporal_profile": loaded.temporal_profile, **update})


async def _complete_prompt(settings: Settings) -> None:
    """A worker and a client, both connected with `settings`, complete a prompt with a tool round."""
    from tests.temporal.test_prompt_workflow import math_plugin

    model = ScriptedModel([tool_calls(("math.add", {"a": 2, "b": 3})), text("five")])
    settings = settings.model_copy(update={"task_queue": f"tls-{uuid.uuid4().hex[:8]}"})
    runtime = build_runtime(settings, plugins=[math_plugin], providers={"normal": model, "high": model})
    worker_client = await connect(settings)
    async with create_worker(worker_client, runtime, task_queue=settings.task_queue):
        client = await AgentClient.connect(settings)
        prompt = await client.run("add 2 and 3")
    assert prompt.state == "completed", prompt.error
    assert prompt.output[-1].text == "five"  # type: ignore[union-attr]


# --- profiles and variables (no server needed) -------------------------------------------------------


def test_profile_file_and_variables(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.prod]\naddress = "prod.example.test:7233"\nnamespace = "agents"\n'
                      'api_key = "secret-key-1"\n[profile.staging]\naddress = "staging.example.test:7233"\n')
    env = {"TEMPORAL_CONFIG_FILE": str(config)}
    prod = Settings.from_env(env, profile="prod")
    assert (prod.temporal_address, prod.namespace) == ("prod.example.test:7233", "agents")
    assert describe_security(prod.temporal_profile) == "api-key"
    assert "secret-key-1" not in repr(prod) and "secret-key-1" not in prod.model_dump_json()
    # TEMPORAL_PROFILE selects, TEMPORAL_* variables override the file
    staging = Settings.from_env({**env, "TEMPORAL_PROFILE": "staging", "TEMPORAL_NAMESPACE": "ns2"})
    assert (staging.temporal_address, staging.namespace) == ("staging.example.test:7233", "ns2")
    assert describe_security(staging.temporal_profile) == "plaintext"
    # defaults without file or variables
    plain = Settings.from_env({"TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml")})
    assert (plain.temporal_address, plain.namespace) == ("127.0.0.1:7233", "default")
    with pytest.raises(ValueError, match="Profile 'nope' not found"):
        Settings.from_env(env, profile="nope")


def test_cli_profile_option_one_line_error(tmp_path: Path) -> None:
    """`--profile` on a command: an unknown profile is one line on stderr and exit code 2."""
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.prod]\naddress = "127.0.0.1:1"\n')
    env = {"PATH": "/usr/bin:/bin", "TEMPORAL_CONFIG_FILE": str(config), "HOME": str(tmp_path)}
    run = subprocess.run([*DAGENT_CMD, "show", "p-1", "--profile", "nope"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Profile 'nope' not found" in lines[0], run.stderr
    # the profile's address is used: nothing listens on port 1, so the connection error names it
    run = subprocess.run([*DAGENT_CMD, "show", "p-1", "--profile", "prod"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Temporal server at 127.0.0.1:1" in lines[0], run.stderr


# --- TLS through a real TLS proxy --------------------------------------------------------------------


async def test_prompt_completes_over_tls_with_api_key(tls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    paths = pki[0]
    settings = _settings({"TEMPORAL_ADDRESS": tls_proxy.address, "TEMPORAL_API_KEY": "dagent-test-key-42",
                          "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem),
                          "TEMPORAL_TLS_SERVER_NAME": "localhost"})
    assert describe_security(settings.temporal_profile) == "api-key"
    await _complete_prompt(settings)
    auth = {h.get("authorization") for h in tls_proxy.headers}
    assert "Bearer dagent-test-key-42" in auth, auth
    assert any(h.get(":path", "").endswith("/PollWorkflowTaskQueue") for h in tls_proxy.headers)


async def test_grpc_compression_off_to_loopback_by_default_and_gzip_when_asked(
        tls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    """The SDK gzips every request by default; `DAGENT_GRPC_COMPRESSION=auto` leaves a server on this machine
    (the proxy listens on 127.0.0.1) uncompressed, and `gzip` turns it back on. The proxy reads each forwarded
    request's `grpc-encoding` and `grpc-accept-encoding` headers."""
    paths = pki[0]
    env = {"TEMPORAL_ADDRESS": tls_proxy.address, "TEMPORAL_API_KEY": "dagent-test-key-42",
           "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem), "TEMPORAL_TLS_SERVER_NAME": "localhost"}
    settings = _settings(env)
    assert settings.grpc_compression == "auto" and is_loopback(tls_proxy.address)
    await _complete_prompt(settings)
    requests = [h for h in tls_proxy.headers if h.get(":path", "").startswith("/temporal.")]
    assert requests and not any(h.get("grpc-encoding") == "gzip" for h in requests), requests[:3]
    assert not any("gzip" in h.get("grpc-accept-encoding", "") for h in requests)

    tls_proxy.headers.clear()
    await _complete_prompt(_settings(env, grpc_compression="gzip"))
    requests = [h for h in tls_proxy.headers if h.get(":path", "").startswith("/temporal.")]
    assert requests and all(h.get("grpc-encoding") == "gzip" for h in requests), requests[:3]


def test_grpc_compression_setting() -> None:
    assert grpc_compression("auto", "127.0.0.1:7233") is GrpcCompression.NONE
    assert grpc_compression("auto", "localhost:7233") is GrpcCompression.NONE
    assert grpc_compression("auto", "[::1]:7233") is GrpcCompression.NONE
    assert grpc_compression("auto", "my-ns.a1b2c.tmprl.cloud:7233") is GrpcCompression.GZIP
    assert grpc_compression("auto", "10.0.0.7:7233") is GrpcCompression.GZIP
    assert grpc_compression("gzip", "127.0.0.1:7233") is GrpcCompression.GZIP
    assert grpc_compression("none", "temporal.example.test:7233") is GrpcCompression.NONE
    assert Settings.from_env({"DAGENT_GRPC_COMPRESSION": "NONE"}).grpc_compression == "none"
    with pytest.raises(ValueError, match="DAGENT_GRPC_COMPRESSION must be auto, gzip or none, not 'zstd'"):
        Settings.from_env({"DAGENT_GRPC_COMPRESSION": "zstd"})


async def test_prompt_completes_over_mtls(mtls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    paths = pki[0]
    settings = _settings({"TEMPORAL_ADDRESS": mtls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                          "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem),
                          "TEMPORAL_TLS_CLIENT_CERT_PATH": str(paths.client_cert),
                          "TEMPORAL_TLS_CLIENT_KEY_PATH": str(paths.client_key)})
    assert describe_security(settings.temporal_profile) == "mtls"
    await _complete_prompt(settings)
    assert mtls_proxy.headers, "no request went through the mTLS proxy"


async def test_wrong_ca_is_one_clear_line(tls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    settings = _settings({"TEMPORAL_ADDRESS": tls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                          "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki[0].other_ca_pem)})
    with pytest.raises(TemporalConnectError) as raised:
        await AgentClient.connect(settings)
    message = str(raised.value)
    assert "\n" not in message
    assert f"cannot connect to Temporal at {tls_proxy.address} (tls)" in message
    assert "not signed by the configured CA" in message, message


async def test_missing_client_key_is_one_clear_line(mtls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    paths = pki[0]
    settings = _settings({"TEMPORAL_ADDRESS": mtls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                          "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem),
                          "TEMPORAL_TLS_CLIENT_CERT_PATH": str(paths.client_cert)})
    with pytest.raises(TemporalConnectError, match=r"client key \(TEMPORAL_TLS_CLIENT_KEY_PATH\) is missing"):
        await AgentClient.connect(settings)
    gone = _settings({"TEMPORAL_ADDRESS": mtls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                      "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem),
                      "TEMPORAL_TLS_CLIENT_CERT_PATH": str(paths.client_cert),
                      "TEMPORAL_TLS_CLIENT_KEY_PATH": str(paths.client_key.with_name("gone.key"))})
    with pytest.raises(TemporalConnectError, match=r"TLS client key file .*gone\.key does not exist"):
        await AgentClient.connect(gone)
    # no client certificate at all: the server refuses the handshake
    anonymous = _settings({"TEMPORAL_ADDRESS": mtls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                           "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(paths.ca_pem)})
    with pytest.raises(TemporalConnectError) as raised:
        await AgentClient.connect(anonymous)
    assert "\n" not in str(raised.value) and "cannot connect to Temporal" in str(raised.value)


async def test_wrong_namespace_is_one_clear_line(tls_proxy: TLSProxy, pki: tuple[Pki, object, object]) -> None:
    settings = _settings({"TEMPORAL_ADDRESS": tls_proxy.address, "TEMPORAL_TLS_SERVER_NAME": "localhost",
                          "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki[0].ca_pem),
                          "TEMPORAL_NAMESPACE": "no-such-namespace"})
    with pytest.raises(TemporalConnectError) as raised:
        await AgentClient.connect(settings)
    message = str(raised.value)
    assert message == (f"namespace 'no-such-namespace' does not exist on {tls_proxy.address} "
                       "(check TEMPORAL_NAMESPACE or the profile's namespace)")
