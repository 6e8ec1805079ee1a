"""How every client, worker and `dagent` command reaches Temporal: the SDK's environment configuration.

`temporalio.envconfig` reads the same TOML profiles (`~/.config/temporalio/temporal.toml`, or
`TEMPORAL_CONFIG_FILE`) and variables as the `temporal` CLI: `TEMPORAL_PROFILE`, `TEMPORAL_ADDRESS`,
`TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS`, `TEMPORAL_TLS_CLIENT_CERT_PATH`,
`TEMPORAL_TLS_CLIENT_KEY_PATH`, `TEMPORAL_TLS_SERVER_CA_CERT_PATH`, `TEMPORAL_TLS_SERVER_NAME`,
`TEMPORAL_GRPC_META_*`. An API key turns TLS on (Temporal Cloud); a client certificate and key give mTLS.

Connection failures are turned into one line that says what to fix (`TemporalConnectError`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS
from temporalio.service import GrpcCompression, RPCError, RPCStatusCode, TLSConfig

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"


NOTHING_LISTENING = "nothing is listening there"


class TemporalConnectError(RuntimeError):
    """Could not connect to Temporal; the message is one line naming the address and what to fix."""


def load_profile(env: Mapping[str, str], profile: str | None = None) -> ClientConfigProfile:
    """The connection profile from the TOML file and `TEMPORAL_*` variables (variables win).

    `profile` (the CLI's `--profile`) overrides `TEMPORAL_PROFILE`. A missing profile or an unreadable
    config file is a `ValueError` with a one-line message.
    """
    env = dict(env)
    if profile:
        env["TEMPORAL_PROFILE"] = profile
    try:
        return ClientConfigProfile.load(override_env_vars=env)
    except Exception as exc:  # the bridge raises its own ConfigError type
        source = env.get("TEMPORAL_CONFIG_FILE") or "~/.config/temporalio/temporal.toml"
        raise ValueError(f"Temporal connection profile: {exc} (config file {source})") from None


def describe_security(profile: ClientConfigProfile | None) -> str:
    """`plaintext`, `tls`, `mtls`, `api-key` or `api-key+tls`, for logs and error messages (never the key)."""
    if profile is None:
        return "plaintext"
    tls = profile.tls
    uses_tls = tls.disabled is not True if tls is not None else profile.api_key is not None
    if profile.api_key is not None:
        return "api-key" if uses_tls else "api-key (no TLS)"
    if not uses_tls:
        return "plaintext"
    return "mtls" if tls is not None and tls.client_cert is not None else "tls"


def _read_tls(tls: ClientConfigTLS) -> bool | TLSConfig:
    """The SDK's TLS config, with unreadable files and a half-configured client pair reported clearly."""
    for label, source in (("server CA certificate", tls.server_root_ca_cert),
                          ("client certificate", tls.client_cert), ("client key", tls.client_private_key)):
        if isinstance(source, Path) and not source.is_file():
            raise TemporalConnectError(f"TLS {label} file {source} does not exist")
    if (tls.client_cert is None) != (tls.client_private_key is None):
        missing = "client key (TEMPORAL_TLS_CLIENT_KEY_PATH)" if tls.client_private_key is None \
            else "client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH)"
        raise TemporalConnectError(f"mTLS needs both a client certificate and a client key: the {missing} is missing")
    return tls.to_connect_tls_config()


def is_loopback(address: str) -> bool:
    """Is `host:port` on this machine (`localhost`, 127.0.0.0/8, `::1`)?"""
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or address.startswith("[") else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def grpc_compression(mode: Literal["auto", "gzip", "none"], address: str) -> GrpcCompression:
    """The SDK compresses every request and response with gzip by default. To a server on this machine the
    bytes cost nothing and the compression costs both sides CPU (a few per cent of a prompt's, each side),
    so `auto` leaves it off there and on for remote servers."""
    if mode == "auto":
        mode = "none" if is_loopback(address) else "gzip"
    return GrpcCompression.NONE if mode == "none" else GrpcCompression.GZIP


def connect_options(address: str, namespace: str, profile: ClientConfigProfile | None,
                    compression: Literal["auto", "gzip", "none"] = "auto") -> dict[str, Any]:
    """Keyword arguments for `Client.connect`: the profile's security settings with `address`/`namespace`, and
    the gRPC compression for `address`."""
    options: dict[str, Any] = {"target_host": address, "namespace": namespace,
                               "grpc_compression": grpc_compression(compression, address)}
    if profile is None:
        return options
    if profile.api_key is not None:
        options["api_key"] = profile.api_key
        options["tls"] = True
    if profile.tls is not None:
        options["tls"] = _read_tls(profile.tls)
    if profile.grpc_meta:
        options["rpc_metadata"] = dict(profile.grpc_meta)
    return options


def _explain(exc: BaseException, address: str, security: str) -> str:
    text = " ".join(str(exc).split())
    lowered = text.lower()
    if "unknownissuer" in lowered or "unknown issuer" in lowered or "certificate verify failed" in lowered \
            or "invalidcertificate" in lowered:
        hint = "the server's certificate is not signed by the configured CA (TEMPORAL_TLS_SERVER_CA_CERT_PATH)"
    elif "certificaterequired" in lowered or "certificate required" in lowered or "handshake" in lowered:
        hint = "the TLS handshake failed (does the server require a client certificate, or a different CA?)"
    elif "invalid" in lowered and ("key" in lowered or "pem" in lowered or "cert" in lowered):
        hint = "a TLS certificate or key could not be parsed"
    elif "connection refused" in lowered or "dns error" in lowered or "tcp connect error" in lowered:
        hint = f"{NOTHING_LISTENING} (check TEMPORAL_ADDRESS or the profile's address)"
    elif "unauthenticated" in lowered or "permission" in lowered or "api key" in lowered:
        hint = "the server refused the credentials (check TEMPORAL_API_KEY or the client certificate)"
    else:
        hint = "the connection failed"
    return f"cannot connect to Temporal at {address} ({security}): {hint} [{text[:300]}]"


async def check_namespace(client: Client) -> None:
    """Fail fast with a clear message when the namespace does not exist (instead of every call failing)."""
    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace),
                                                         retry=True)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise TemporalConnectError(
                f"namespace {client.namespace!r} does not exist on {client.service_client.config.target_host} "
                "(check TEMPORAL_NAMESPACE or the profile's namespace)") from None
        if exc.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNAUTHENTICATED):
            return  # namespace-scoped credentials may not describe; real calls will say more
        raise


async def connect_client(address: str, namespace: str, profile: ClientConfigProfile | None,
                         compression: Literal["auto", "gzip", "none"] = "auto", **client_options: Any) -> Client:
    """`Client.connect` with the profile's TLS/API key; raises `TemporalConnectError` with one clear line."""
    options = connect_options(address, namespace, profile, compression)
    security = describe_security(profile)
    try:
        client = await Client.connect(**options, **client_options)
    except TemporalConnectError:
        raise
    except (RuntimeError, RPCError, OSError) as exc:
        raise TemporalConnectError(_explain(exc, address, security)) from None
    await check_namespace(client)
    return client


async def described(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription | None:
    """The workflow's description, or None when the server has no workflow by that id (describe is not billed)."""
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
