"""Configuration: one `Settings`, read once from the environment (`Settings.from_env()`).

This is the only module that reads environment variables (parsed by workers/env_values.py). Everything else
receives a `Settings` (or the values it needs from one). Defaults run offline out of the box: a local dev
server, the scripted demo model and the demo plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.providers.specs import chain_specs, provider_of
from durable_agent.workers import env_values
from durable_agent.workers.connection import DEFAULT_ADDRESS, DEFAULT_NAMESPACE, load_profile
from durable_agent.workers.durations import parse_duration
from durable_agent.workers.env_values import model_settings, pem, positive_number, provider_map, tristate, whole_number
from durable_agent.workers.observability import ObservabilityConfig
from durable_agent.workers.storage.codec import AESGCMCodec, codec_for
from durable_agent.workers.storage.converter import DEFAULT_PAYLOAD_THRESHOLD, compose_data_converter
from durable_agent.workers.storage.files import BlobFileStore
from durable_agent.workers.storage.local import DirectoryObjects
from durable_agent.workers.storage.objects import ObjectClient
from durable_agent.workers.storage.stores import objects_for
from durable_agent.workflows.protocol import ModelRouting

DEFAULT_TASK_QUEUE = "durable-agent"
DEMO_MODEL = "scripted:durable_agent.plugins.demo:demo_model"
DEMO_PLUGINS = "durable_agent.plugins.demo:plugin"
WorkflowSandbox = Literal["off", "on", "strict"]
WorkerQueues = Literal["all", "workflows", "models"]
ModelCalls = Literal["activity", "local"]
GrpcCompressionMode = Literal["auto", "gzip", "none"]
DecisionMode = Literal["open", "signed"]
SDK_WORKFLOW_TASK_SLOTS = 100  # the SDK's own default for `max_concurrent_workflow_tasks`


def tasks_fit_cache(cached: int, tasks: int | None) -> bool:
    """Whether a worker caching `cached` workflows and running `tasks` workflow tasks at once (None: the SDK's
    default) runs at most half as many tasks as it caches, or caches nothing: what local model calls need."""
    return cached == 0 or (tasks or SDK_WORKFLOW_TASK_SLOTS) * 2 <= cached


class Settings(BaseModel):
    """Everything a client or worker needs to know; each field names the variable it is read from.

    API keys are not fields: providers read them from `provider_env` when a worker builds them, so they
    never travel in workflow inputs, results or history, and never show in a repr or a log line.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    # --- both client and worker ---
    temporal_address: str = Field(default=DEFAULT_ADDRESS, description=(
        "TEMPORAL_ADDRESS: the frontend, host:port (or the address of the TEMPORAL_PROFILE profile)."))
    namespace: str = Field(default=DEFAULT_NAMESPACE,
                           description="TEMPORAL_NAMESPACE: the namespace (or the profile's).")
    temporal_profile: ClientConfigProfile | None = Field(default=None, exclude=True, repr=False, description=(
        "TLS, API key and gRPC metadata from `temporalio.envconfig`: the TOML profile file (TEMPORAL_CONFIG_FILE,"
        " TEMPORAL_PROFILE or `--profile`) and TEMPORAL_API_KEY / TEMPORAL_TLS_* (never serialised or shown)."))
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE,
                            description="DAGENT_TASK_QUEUE: where prompts are started and workers poll.")
    payload_dir: str = Field(default=".dagent/payloads", description=(
        "DAGENT_PAYLOAD_DIR: where payloads above `payload_threshold` are stored outside history; clients "
        "and workers must share it."))
    payload_threshold: int = Field(default=DEFAULT_PAYLOAD_THRESHOLD, ge=1, description=(
        "DAGENT_PAYLOAD_THRESHOLD: payloads of this many bytes or more go to `payload_dir`."))
    log_level: str = Field(default="INFO", description="DAGENT_LOG_LEVEL: the `durable_agent` loggers' level in "
                           "our CLI (JSON lines off a TTY) and for OTEL_LOGS_EXPORTER when the process set none.")

    # --- client only ---
    ui_url: str = Field(default="http://127.0.0.1:8233", description="DAGENT_UI_URL: links to the Temporal UI.")

    # --- worker only ---
    model_normal: str = Field(default=DEMO_MODEL, description=(
        "DAGENT_MODEL_NORMAL: `provider:model` of the normal tier (e.g. `openai:gpt-4o`)."))
    model_high: str = Field(default="", description="DAGENT_MODEL_HIGH: the high tier; empty = the normal one.")
    model_settings_normal: ModelSettings | None = Field(default=None, description=(
        "DAGENT_MODEL_SETTINGS_NORMAL: JSON model settings of the normal tier (see agent/model_settings.py)."))
    model_settings_high: ModelSettings | None = Field(default=None, description=(
        "DAGENT_MODEL_SETTINGS_HIGH: JSON model settings of the high tier (default: the normal tier's when "
        "the high tier uses the normal model)."))
    prices: str = Field(default="", description=(
        "DAGENT_PRICES: model prices as inline JSON or the path of a JSON file (see agent/pricing.py)."))
    model_fallback_attempts: int = Field(default=3, ge=1, description=(
        "DAGENT_MODEL_FALLBACK_ATTEMPTS: attempts of a retryable failure before a fallback chain moves on."))
    model_task_queue: str = Field(default="", description=(
        "DAGENT_MODEL_TASK_QUEUE (client and worker): the task queue of model calls; empty = `task_queue`."))
    model_task_queue_high: str = Field(default="", description=(
        "DAGENT_MODEL_TASK_QUEUE_HIGH (client and worker): the high tier's own model queue (e.g. another "
        "provider's rate limit); empty = `model_task_queue`."))
    model_calls: ModelCalls = Field(default="activity", description=(
        "DAGENT_MODEL_CALLS (client and worker): `activity` (default: each model call its own activity, its text "
        "streamed to watchers) or `local` (a local activity inside the workflow task that takes the tools' "
        "results: one workflow task fewer per tool round, no streamed text; not with model queues)."))
    worker_queues: WorkerQueues = Field(default="all", description=(
        "DAGENT_WORKER_QUEUES: what `dagent worker` polls: `all`, `workflows` (workflows and tools) or "
        "`models` (model calls only)."))
    model_concurrency: int | None = Field(default=None, gt=0, description=(
        "DAGENT_MODEL_CONCURRENCY: model calls one worker runs at once on a model queue."))
    model_rate: float | None = Field(default=None, gt=0, description=(
        "DAGENT_MODEL_RATE: the most model calls a tier's model queue starts in any one second, all workers "
        "together (the server enforces a rate derived from it: workers/rate_limits.py)."))
    provider_queues: dict[str, str] = Field(default_factory=dict, description=(
        "DAGENT_PROVIDER_QUEUES (client and worker): `provider=queue,...`: the model calls of these providers "
        "(the `provider` of `provider:model`, e.g. `anthropic`) run on their own queue; others on the tier's."))
    provider_rates: dict[str, float] = Field(default_factory=dict, description=(
        "DAGENT_PROVIDER_RATES: `provider=limit,...`: the most calls a provider's queue starts in any one "
        "second, all workers together (default: DAGENT_MODEL_RATE)."))
    model_worker_rate: float | None = Field(default=None, gt=0, description=(
        "DAGENT_MODEL_WORKER_RATE: model calls per second one worker starts (max_activities_per_second)."))
    plugins: tuple[str, ...] = Field(default=(DEMO_PLUGINS,), description=(
        "DAGENT_PLUGINS: comma-separated `module:attribute` plugin paths (empty for none)."))
    file_dir: str = Field(default=".dagent/files", description="DAGENT_FILE_DIR: where tools store files.")
    stream_text: bool | None = Field(default=None, description=(
        "DAGENT_STREAM_TEXT: `1` streams model text to watchers live: the text so far and tool progress every 0.5 s "
        "while they change, one heartbeat (a billable action) each. Unset, `auto` or `0`: answers are read whole, "
        "a round's text reaches watchers when the round ends, tool progress rides the liveness heartbeats."))
    workflow_sandbox: WorkflowSandbox = Field(default="on", description=(
        "DAGENT_WORKFLOW_SANDBOX: Temporal's workflow sandbox: `on` (default: our package passed through), "
        "`strict` (every test worker and the replay tests) or `off` (opt-in, for those who measured its gain)."))
    max_cached_workflows: int = Field(default=64, ge=0, description=(
        "DAGENT_MAX_CACHED_WORKFLOWS: workflows a worker keeps in memory; waiting prompts beyond this are "
        "evicted and replayed when needed."))
    cached_waiting: int = Field(default=8, ge=0, description=(
        "DAGENT_CACHED_WAITING (worker): prompts waiting for an approval that a worker keeps in its workflow "
        "cache, the most recent; older ones leave it (their decision replays them). At least "
        "DAGENT_MAX_CACHED_WORKFLOWS: only the cache's own eviction, as in Temporal."))
    max_workflow_tasks: int | None = Field(default=None, ge=2, description=(
        "DAGENT_MAX_WORKFLOW_TASKS: workflow tasks a worker runs at once (Temporal's "
        "`max_concurrent_workflow_tasks`); default: the SDK's 100, but with DAGENT_MODEL_CALLS=local half of "
        "DAGENT_MAX_CACHED_WORKFLOWS (at least 2), so that the prompts in a model call always fit in the cache."))
    grpc_compression: GrpcCompressionMode = Field(default="auto", description=(
        "DAGENT_GRPC_COMPRESSION: gzip on the wire to Temporal: `auto` (none to a loopback address, gzip "
        "otherwise), `gzip` or `none`."))
    metrics_port: int | None = Field(default=None, ge=1, le=65535, description=(
        "DAGENT_METRICS_PORT (or `dagent worker --metrics-port`): serve Prometheus metrics on this port."))
    metrics_host: str = Field(default="127.0.0.1", description="DAGENT_METRICS_HOST: the metrics endpoint's address.")
    trace_content: bool = Field(default=False, description=(
        "DAGENT_TRACE_CONTENT: record prompt and completion text on model spans (off by default)."))
    temporal_spans: bool = Field(default=False, description=(
        "DAGENT_TEMPORAL_SPANS: with tracing on, add the Temporal SDK's own spans (StartWorkflow, RunWorkflow, "
        "StartActivity, RunActivity, ...) to each prompt's trace (off by default)."))
    fast_tools: bool = Field(default=True, description=(
        "DAGENT_FAST_TOOLS (worker): a tool that leaves `local` unset runs its calls as local activities "
        "once this worker has seen it finish fast (docs: Tools and plugins, fast tools); off: always a "
        "regular activity."))
    otel_env: Mapping[str, str] = Field(default_factory=dict, repr=False, exclude=True, description=(
        "The standard OTEL_* variables (exporters, endpoint, protocol, service name): see docs/observability.md."))
    provider_env: Mapping[str, str] = Field(default_factory=dict, repr=False, exclude=True, description=(
        "The environment providers read their API keys and base URLs from (never serialised or shown)."))
    decision_public_key: str | None = Field(default=None, repr=False, description=(
        "DAGENT_DECISION_PUBLIC_KEY (PEM) or DAGENT_DECISION_PUBLIC_KEY_FILE: decisions on approvals must carry "
        "a token signed by the matching private key (held by `dagent api`); unset = unsigned decisions."))
    decisions: DecisionMode = Field(default="open", description=(
        "DAGENT_DECISIONS (worker): `signed` makes a worker without a valid DAGENT_DECISION_PUBLIC_KEY refuse to "
        "start (set it fleet-wide when the API signs, so no worker plans calls that accept unsigned decisions); "
        "`open` (default): the key decides."))
    four_eyes: bool = Field(default=False, description=(
        "DAGENT_FOUR_EYES (worker): a prompt's own user may not approve its calls, for every policy that leaves "
        "`Approval.four_eyes` unset (docs/approvals-policy.md)."))
    notify_config: str | None = Field(default=None, description="DAGENT_NOTIFY_CONFIG (worker): telling approvers.")

    # --- the blob store and payload encryption (both client and worker; see docs/deploying.md) ---
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

    # --- running it in production (docs/operations.md) ---
    graceful_shutdown: timedelta = Field(default=timedelta(seconds=30), description=(
        "DAGENT_GRACEFUL_SHUTDOWN (worker): on SIGTERM/SIGINT `dagent worker` stops polling and lets running tools "
        "and model calls finish for up to this long (e.g. 30s, 2m; 0 = cancel them at once) before it exits."))
    deployment_name: str | None = Field(default=None, description=(
        "DAGENT_DEPLOYMENT_NAME (worker): join this Temporal Worker Deployment (with DAGENT_BUILD_ID); "
        "unset = unversioned workers, as before."))
    build_id: str | None = Field(default=None, description=(
        "DAGENT_BUILD_ID (worker): this worker's build id within DAGENT_DEPLOYMENT_NAME (e.g. a git sha)."))

    @classmethod
    @env_values.naming_variables  # a bad value is a ValueError whose one line names its variable
    def from_env(cls, env: Mapping[str, str] | None = None, *, profile: str | None = None) -> Settings:
        """Settings from `env`; the Temporal connection from the envconfig profile (`profile` overrides
        TEMPORAL_PROFILE) and its TEMPORAL_* variables, exactly as the `temporal` CLI reads them."""
        env = dict(os.environ if env is None else env)
        defaults = cls()
        plugins = env.get("DAGENT_PLUGINS")
        connection = load_profile(env, profile)
        return cls(
            temporal_address=connection.address or defaults.temporal_address,
            namespace=connection.namespace or defaults.namespace,
            temporal_profile=connection,
            task_queue=env.get("DAGENT_TASK_QUEUE", defaults.task_queue),
            payload_dir=env.get("DAGENT_PAYLOAD_DIR", defaults.payload_dir),
            payload_threshold=whole_number(env, "DAGENT_PAYLOAD_THRESHOLD", defaults.payload_threshold),
            log_level=env.get("DAGENT_LOG_LEVEL", defaults.log_level),
            ui_url=env.get("DAGENT_UI_URL", defaults.ui_url),
            model_normal=env.get("DAGENT_MODEL_NORMAL", defaults.model_normal),
            model_high=env.get("DAGENT_MODEL_HIGH", defaults.model_high),
            model_settings_normal=model_settings(env, "DAGENT_MODEL_SETTINGS_NORMAL"),
            model_settings_high=model_settings(env, "DAGENT_MODEL_SETTINGS_HIGH"),
            model_fallback_attempts=whole_number(env, "DAGENT_MODEL_FALLBACK_ATTEMPTS",
                                                 defaults.model_fallback_attempts),
            model_task_queue=env.get("DAGENT_MODEL_TASK_QUEUE", defaults.model_task_queue),
            model_task_queue_high=env.get("DAGENT_MODEL_TASK_QUEUE_HIGH", defaults.model_task_queue_high),
            model_calls=env_values.one_of(env, "DAGENT_MODEL_CALLS", ModelCalls, defaults.model_calls),
            worker_queues=env_values.one_of(env, "DAGENT_WORKER_QUEUES", WorkerQueues, defaults.worker_queues),
            model_concurrency=positive_number(env, "DAGENT_MODEL_CONCURRENCY", int),
            model_rate=positive_number(env, "DAGENT_MODEL_RATE", float),
            model_worker_rate=positive_number(env, "DAGENT_MODEL_WORKER_RATE", float),
            provider_queues=provider_map(env, "DAGENT_PROVIDER_QUEUES", str),
            provider_rates=provider_map(env, "DAGENT_PROVIDER_RATES", float),
            plugins=tuple(p.strip() for p in plugins.split(",") if p.strip()) if plugins is not None
            else defaults.plugins,
            file_dir=env.get("DAGENT_FILE_DIR", defaults.file_dir),
            stream_text=tristate(env.get("DAGENT_STREAM_TEXT")),
            prices=env.get("DAGENT_PRICES", defaults.prices),
            workflow_sandbox=env_values.one_of(env, "DAGENT_WORKFLOW_SANDBOX", WorkflowSandbox,
                                               defaults.workflow_sandbox),
            max_cached_workflows=whole_number(env, "DAGENT_MAX_CACHED_WORKFLOWS", defaults.max_cached_workflows),
            cached_waiting=whole_number(env, "DAGENT_CACHED_WAITING", defaults.cached_waiting),
            max_workflow_tasks=positive_number(env, "DAGENT_MAX_WORKFLOW_TASKS", int),
            grpc_compression=env_values.one_of(env, "DAGENT_GRPC_COMPRESSION", GrpcCompressionMode,
                                      defaults.grpc_compression),
            metrics_port=positive_number(env, "DAGENT_METRICS_PORT", int),
            metrics_host=env.get("DAGENT_METRICS_HOST", defaults.metrics_host),
            trace_content=tristate(env.get("DAGENT_TRACE_CONTENT")) is True,
            temporal_spans=tristate(env.get("DAGENT_TEMPORAL_SPANS")) is True,
            fast_tools=tristate(env.get("DAGENT_FAST_TOOLS")) is not False,
            otel_env={name: value for name, value in env.items() if name.startswith("OTEL_")},
            provider_env=env,
            store=env.get("DAGENT_STORE", defaults.store).strip(),
            s3_endpoint_url=(env.get("DAGENT_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3")
                             or env.get("AWS_ENDPOINT_URL") or None),
            codec_keys=SecretStr(env["DAGENT_CODEC_KEYS"]) if env.get("DAGENT_CODEC_KEYS", "").strip() else None,
            codec_key_id=env.get("DAGENT_CODEC_KEY_ID") or None,
            codec_auth_token=SecretStr(env["DAGENT_CODEC_AUTH_TOKEN"]) if env.get("DAGENT_CODEC_AUTH_TOKEN") else None,
            codec_cors_origins=tuple(o.strip() for o in env.get("DAGENT_CODEC_CORS_ORIGINS", "").split(",")
                                     if o.strip()),
            decision_public_key=pem(env, "DAGENT_DECISION_PUBLIC_KEY"),
            decisions=env_values.one_of(env, "DAGENT_DECISIONS", DecisionMode, "open"),
            four_eyes=tristate(env.get("DAGENT_FOUR_EYES")) is True,
            notify_config=env.get("DAGENT_NOTIFY_CONFIG", "").strip() or None,
            graceful_shutdown=parse_duration(env.get("DAGENT_GRACEFUL_SHUTDOWN", "30s"),
                                             what="DAGENT_GRACEFUL_SHUTDOWN"),
            deployment_name=env.get("DAGENT_DEPLOYMENT_NAME", "").strip() or None,
            build_id=env.get("DAGENT_BUILD_ID", "").strip() or None,
        ).check_provider_queues().check_model_calls().check_deployment()

    def check_worker_decisions(self) -> Settings:
        """A worker's decision configuration, strictly: a public key that is not an Ed25519 public key in PEM, or
        `decisions=signed` without one, is a one-line error (never showing the key)."""
        if self.decision_public_key:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            try:
                key = load_pem_public_key(self.decision_public_key.encode())
            except (ValueError, TypeError) as exc:
                raise ValueError("DAGENT_DECISION_PUBLIC_KEY is not a PEM public key: "
                                 f"{type(exc).__name__}") from None
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError(f"DAGENT_DECISION_PUBLIC_KEY must be Ed25519, not {type(key).__name__}")
        elif self.decisions == "signed":
            raise ValueError("DAGENT_DECISIONS=signed but this worker has no DAGENT_DECISION_PUBLIC_KEY "
                             "(or _FILE): its approvals would accept unsigned decisions; refusing to start")
        return self

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
        """Tracing, metrics and log exporters: the OTEL_* variables plus the metrics port."""
        return ObservabilityConfig.from_env(self.otel_env, metrics_port=self.metrics_port,
                                            metrics_host=self.metrics_host, log_level=self.log_level,
                                            temporal_spans=self.temporal_spans)

    def data_converter(self, existing: DataConverter | None = None) -> DataConverter:
        """Ours, as a function of `existing` (a team's converter: workers/storage/converter.py says what is kept)."""
        return compose_data_converter(existing, self.blob_objects(), threshold=self.payload_threshold,
                                      codec=self.codec())

    @property
    def workflow_task_slots(self) -> int | None:
        """Workflow tasks a worker runs at once (None: the SDK's default, 100): `max_workflow_tasks`, else with local
        model calls half the cache (at least 2, at most 100). A local model call holds its prompt's workflow task,
        and so its place in the cache, for the whole call; with more tasks at once than half the cache, the SDK
        evicts prompts in the middle of one when more are busy than it holds, and their tasks time out (10 s
        each; three quarters of the cache was measured not to be enough: bench/RESULTS-28.md)."""
        if self.max_workflow_tasks is not None:
            return self.max_workflow_tasks
        if self.model_calls != "local" or self.max_cached_workflows == 0:
            return None
        return min(SDK_WORKFLOW_TASK_SLOTS, max(2, self.max_cached_workflows // 2))

    @property
    def model_tiers(self) -> dict[str, str]:
        return {"normal": self.model_normal, "high": self.model_high or self.model_normal}

    def tier_queue(self, tier: str) -> str | None:
        """The task queue of a tier's model calls whose provider has none of its own; None: the workflow's."""
        if tier == "high" and self.model_task_queue_high:
            return self.model_task_queue_high
        return self.model_task_queue or None

    def model_queue_for(self, tier: str) -> str | None:
        """Where a prompt's model calls start: the queue of the tier's first provider, else the tier's queue."""
        first_provider = provider_of(chain_specs(self.model_tiers[tier])[0])
        return self.provider_queues.get(first_provider) or self.tier_queue(tier)

    def model_routing(self, tier: str) -> ModelRouting | None:
        """What a prompt records so the workflow sends a fallback round to its provider's queue."""
        if not self.provider_queues:
            return None
        return ModelRouting(tier_queue=self.tier_queue(tier), providers=self.provider_queues)

    @property
    def model_queue_limits(self) -> dict[str, float | None]:
        """Every model queue a models worker polls -> its limit in calls per second (None: unlimited)."""
        tiers = {q: self.model_rate for q in (self.tier_queue("normal"), self.tier_queue("high")) if q}
        providers = {queue: self.provider_rates.get(provider, self.model_rate)
                     for provider, queue in self.provider_queues.items()}
        return tiers | providers

    @property
    def model_queues(self) -> list[str]:
        return list(self.model_queue_limits)

    def check_deployment(self) -> Settings:
        """A Worker Deployment needs both its name and this worker's build id (one line if only one is set)."""
        if bool(self.deployment_name) != bool(self.build_id):
            missing = "DAGENT_BUILD_ID" if self.deployment_name else "DAGENT_DEPLOYMENT_NAME"
            raise ValueError(f"worker versioning needs DAGENT_DEPLOYMENT_NAME and DAGENT_BUILD_ID together: "
                             f"{missing} is not set")
        return self

    def check_model_calls(self) -> Settings:
        """A one-line error for local model calls with a model queue (a local activity runs on the workflow's
        worker)."""
        queues = [name for name, value in (("DAGENT_MODEL_TASK_QUEUE", self.model_task_queue),
                                           ("DAGENT_MODEL_TASK_QUEUE_HIGH", self.model_task_queue_high),
                                           ("DAGENT_PROVIDER_QUEUES", self.provider_queues)) if value]
        if self.model_calls == "local" and queues:
            raise ValueError(f"DAGENT_MODEL_CALLS=local runs model calls on the workflow's worker: unset "
                             f"{' and '.join(queues)}, or use DAGENT_MODEL_CALLS=activity")
        return self

    def check_provider_queues(self) -> Settings:
        """One-line errors for provider queues that would collide or rates without a queue."""
        if unknown := sorted(set(self.provider_rates) - set(self.provider_queues)):
            raise ValueError(f"DAGENT_PROVIDER_RATES: {', '.join(unknown)} has no queue in DAGENT_PROVIDER_QUEUES "
                             "(a provider's limit applies to its own queue)")
        queues = list(self.provider_queues.values())
        if shared := sorted({q for q in queues if queues.count(q) > 1}):
            raise ValueError(f"DAGENT_PROVIDER_QUEUES: queue {shared[0]} is given to more than one provider "
                             "(one queue, one provider's limit)")
        others = {self.task_queue: "DAGENT_TASK_QUEUE", self.model_task_queue: "DAGENT_MODEL_TASK_QUEUE",
                  self.model_task_queue_high: "DAGENT_MODEL_TASK_QUEUE_HIGH"}
        for provider, queue in self.provider_queues.items():
            if queue in others:
                raise ValueError(f"DAGENT_PROVIDER_QUEUES: {provider}'s queue {queue} is also {others[queue]}")
        return self

    @property
    def tier_settings(self) -> dict[str, ModelSettings]:
        """Each tier's model settings; the high tier falls back to the normal tier's, as its model does."""
        normal = self.model_settings_normal or ModelSettings()
        high = self.model_settings_high or (normal if not self.model_high else ModelSettings())
        return {"normal": normal, "high": high}

    def workflow_url(self, workflow_id: str) -> str:
        return f"{self.ui_url.rstrip('/')}/namespaces/{self.namespace}/workflows/{workflow_id}"
