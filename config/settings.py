"""What a client needs to know (`ClientSettings`): where Temporal is and how to reach it, the task queue prompts
start on, and how payloads and files are stored and encrypted. Read once from the environment
(`ClientSettings.from_env()`); `AgentClient`, `dagent` and the API build on it.

A worker needs all of it and more (models, where model calls run, tools, caches, budgets): `WorkerSettings`
(workers/settings.py) extends this model, and `Settings`, the combined one the CLI reads, is that. Where a prompt's
model calls run is not a client's setting: the worker that runs the prompt says (workers/routing.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile
from temporalio.plugin import SimplePlugin

from durable_agent.config import env_values
from durable_agent.config.connection import DEFAULT_ADDRESS, DEFAULT_NAMESPACE, load_profile
from durable_agent.config.env_values import tristate, whole_number
from durable_agent.config.observability import ObservabilityConfig
from durable_agent.config.storage.codec import AESGCMCodec, codec_for
from durable_agent.config.storage.converter import DEFAULT_PAYLOAD_THRESHOLD, compose_data_converter
from durable_agent.config.storage.files import BlobFileStore
from durable_agent.config.storage.local import DirectoryObjects
from durable_agent.config.storage.objects import ObjectClient
from durable_agent.config.storage.stores import objects_for

DEFAULT_TASK_QUEUE = "durable-agent"
GrpcCompressionMode = Literal["auto", "gzip", "none"]


class ClientSettings(BaseModel):
    """What a client (and every worker) needs; each field names the variable it is read from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    # --- client and worker (`ClientSettings`, config/settings.py) ---
    temporal_address: str = Field(default=DEFAULT_ADDRESS, description=(
        "TEMPORAL_ADDRESS: the frontend, host:port (or the address of the TEMPORAL_PROFILE profile)."))
    namespace: str = Field(default=DEFAULT_NAMESPACE,
                           description="TEMPORAL_NAMESPACE: the namespace (or the profile's).")
    temporal_profile: ClientConfigProfile | None = Field(default=None, exclude=True, repr=False, description=(
        "TLS, API key and gRPC metadata from `temporalio.envconfig`: the TOML profile file (TEMPORAL_CONFIG_FILE,"
        " TEMPORAL_PROFILE or `--profile`) and TEMPORAL_API_KEY / TEMPORAL_TLS_* (never serialised or shown)."))
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE,
                            description="DAGENT_TASK_QUEUE: where prompts are started and workers poll.")
    grpc_compression: GrpcCompressionMode = Field(default="auto", description=(
        "DAGENT_GRPC_COMPRESSION: gzip on the wire to Temporal: `auto` (none to a loopback address, gzip "
        "otherwise), `gzip` or `none`."))
    deployment_name: str | None = Field(default=None, description=(
        "DAGENT_DEPLOYMENT_NAME (worker; a client starts no prompt eagerly when set): join this Temporal Worker "
        "Deployment (with DAGENT_BUILD_ID); unset = unversioned workers, as before."))
    ui_url: str = Field(default="http://127.0.0.1:8233", description="DAGENT_UI_URL: links to the Temporal UI.")
    log_level: str = Field(default="INFO", description="DAGENT_LOG_LEVEL: the `durable_agent` loggers' level in "
                           "our CLI (JSON lines off a TTY) and for OTEL_LOGS_EXPORTER when the process set none.")
    temporal_spans: bool = Field(default=False, description=(
        "DAGENT_TEMPORAL_SPANS: with tracing on, add the Temporal SDK's own spans (StartWorkflow, RunWorkflow, "
        "StartActivity, RunActivity, ...) to each prompt's trace (off by default)."))
    otel_env: Mapping[str, str] = Field(default_factory=dict, repr=False, exclude=True, description=(
        "The standard OTEL_* variables (exporters, endpoint, protocol, service name): see docs/observability.md."))

    # --- the blob store and payload encryption (client and worker; see docs/deploying.md) ---
    payload_dir: str = Field(default=".dagent/payloads", description=(
        "DAGENT_PAYLOAD_DIR: where payloads above `payload_threshold` are stored outside history; clients "
        "and workers must share it."))
    payload_threshold: int = Field(default=DEFAULT_PAYLOAD_THRESHOLD, ge=1, description=(
        "DAGENT_PAYLOAD_THRESHOLD: payloads of this many bytes or more go to `payload_dir`."))
    file_dir: str = Field(default=".dagent/files", description="DAGENT_FILE_DIR: where tools store files.")
    store: str = Field(default="", description=(
        "DAGENT_STORE: empty = the local directories `payload_dir` / `file_dir`; `s3://bucket` or `gs://bucket` "
        "= one store for payloads and files shared by every client and worker."))
    s3_endpoint_url: str | None = Field(default=None, description=(
        "DAGENT_S3_ENDPOINT_URL: an S3-compatible server such as MinIO (or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)."))
    codec_keys: SecretStr | None = Field(default=None, repr=False, description=(
        "DAGENT_CODEC_KEYS: `key-id:<base64 32 bytes>,...` switches on AES-GCM payload encryption."))
    codec_key_id: str | None = Field(default=None, description=(
        "DAGENT_CODEC_KEY_ID: the key new payloads are encrypted with (default: the first listed)."))
    codec_auth_token: SecretStr | None = Field(default=None, repr=False, description=(
        "DAGENT_CODEC_AUTH_TOKEN: `dagent codec-server` requires `Authorization: Bearer <token>`."))
    codec_cors_origins: tuple[str, ...] = Field(default=(), description=(
        "DAGENT_CODEC_CORS_ORIGINS: comma-separated UI origins the codec server answers (default: DAGENT_UI_URL)."))

    @classmethod
    @env_values.naming_variables  # a bad value is a ValueError whose one line names its variable
    def from_env(cls, env: Mapping[str, str] | None = None, *, profile: str | None = None) -> ClientSettings:
        """Settings from `env`; the Temporal connection from the envconfig profile (`profile` overrides
        TEMPORAL_PROFILE) and its TEMPORAL_* variables, exactly as the `temporal` CLI reads them."""
        return cls(**client_fields(dict(os.environ if env is None else env), profile))

    def blob_objects(self) -> ObjectClient:
        """Where payloads above the threshold go: the payload directory, or the shared S3/GCS store."""
        return objects_for(self.store, self.payload_dir, s3_endpoint_url=self.s3_endpoint_url)

    def file_store(self) -> BlobFileStore:
        """Where `ToolContext.add_file` contents go: the file directory, or the same shared store."""
        objects = self.blob_objects()
        if isinstance(objects, DirectoryObjects):
            objects = objects_for("", self.file_dir)
        return BlobFileStore(objects, namespace=self.namespace, codec=self.codec())  # files encrypted like payloads

    def codec(self) -> AESGCMCodec | None:
        """The payload codec when `codec_keys` is set (a `CodecKeyError` names a bad entry)."""
        return codec_for(self.codec_keys.get_secret_value(), self.codec_key_id) if self.codec_keys else None

    def observability(self) -> ObservabilityConfig:
        """Tracing and log exporters from the OTEL_* variables (a worker's add its metrics endpoint)."""
        return ObservabilityConfig.from_env(self.otel_env, log_level=self.log_level,
                                            temporal_spans=self.temporal_spans)

    def data_converter(self, existing: DataConverter | None = None) -> DataConverter:
        """Ours, as a function of `existing` (a team's converter: config/storage/converter.py says what is kept)."""
        return compose_data_converter(existing, self.blob_objects(), threshold=self.payload_threshold,
                                      codec=self.codec())

    def workflow_url(self, workflow_id: str) -> str:
        return f"{self.ui_url.rstrip('/')}/namespaces/{self.namespace}/workflows/{workflow_id}"


class ClientPlugin(SimplePlugin):
    """Our data converter (payload store, codec) on a client of its own (`AgentClient.connect`). It carries the
    settings it was built from: `create_worker` on such a client takes them (workers/worker.py)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        super().__init__("durable-agent-client", data_converter=settings.data_converter)


def client_fields(env: Mapping[str, str], profile: str | None) -> dict[str, Any]:
    """`ClientSettings`' fields read from `env` (the variables a client and a worker both read)."""
    defaults = ClientSettings()
    connection = load_profile(env, profile)
    return dict(
        temporal_address=connection.address or defaults.temporal_address,
        namespace=connection.namespace or defaults.namespace,
        temporal_profile=connection,
        task_queue=env.get("DAGENT_TASK_QUEUE", defaults.task_queue),
        grpc_compression=env_values.one_of(env, "DAGENT_GRPC_COMPRESSION", GrpcCompressionMode,
                                           defaults.grpc_compression),
        deployment_name=env.get("DAGENT_DEPLOYMENT_NAME", "").strip() or None,
        ui_url=env.get("DAGENT_UI_URL", defaults.ui_url),
        log_level=env.get("DAGENT_LOG_LEVEL", defaults.log_level),
        temporal_spans=tristate(env.get("DAGENT_TEMPORAL_SPANS")) is True,
        otel_env={name: value for name, value in env.items() if name.startswith("OTEL_")},
        payload_dir=env.get("DAGENT_PAYLOAD_DIR", defaults.payload_dir),
        payload_threshold=whole_number(env, "DAGENT_PAYLOAD_THRESHOLD", defaults.payload_threshold),
        file_dir=env.get("DAGENT_FILE_DIR", defaults.file_dir),
        store=env.get("DAGENT_STORE", defaults.store).strip(),
        s3_endpoint_url=(env.get("DAGENT_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3")
                         or env.get("AWS_ENDPOINT_URL") or None),
        codec_keys=SecretStr(env["DAGENT_CODEC_KEYS"]) if env.get("DAGENT_CODEC_KEYS", "").strip() else None,
        codec_key_id=env.get("DAGENT_CODEC_KEY_ID") or None,
        codec_auth_token=SecretStr(env["DAGENT_CODEC_AUTH_TOKEN"]) if env.get("DAGENT_CODEC_AUTH_TOKEN") else None,
        codec_cors_origins=tuple(o.strip() for o in env.get("DAGENT_CODEC_CORS_ORIGINS", "").split(",")
                                 if o.strip()),
    )
