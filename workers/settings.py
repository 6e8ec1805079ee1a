"""What a worker needs: `WorkerSettings`, read once from the environment (`Settings.from_env()`).

A worker connects to Temporal as a client does, so `WorkerSettings` extends `ClientSettings` (config/settings.py:
the connection, task queue, payload store and codec) with what only a worker decides: its models, where their
calls run (workers/routing.py gives each prompt the worker's routing), tools, caches, budgets and decisions.
`Settings`, the combined settings the CLI reads and users pass around, is `WorkerSettings`. This module and
config/settings.py are the only ones that read environment variables (parsed by config/env_values.py). Defaults
run offline out of the box: a local dev server, the scripted demo model and the demo plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import Field

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.providers.specs import chain_specs, provider_of
from durable_agent.config import env_values
from durable_agent.config.durations import parse_duration
from durable_agent.config.env_values import model_settings, pem, positive_number, provider_map, tristate, whole_number
from durable_agent.config.observability import ObservabilityConfig
from durable_agent.config.settings import DEFAULT_TASK_QUEUE, ClientSettings, GrpcCompressionMode, client_fields
from durable_agent.workers.routing import TierRouting, WorkerRouting
from durable_agent.workflows.protocol import ModelRouting

DEMO_MODEL = "scripted:durable_agent.plugins.demo:demo_model"
DEMO_PLUGINS = "durable_agent.plugins.demo:plugin"
WorkflowSandbox = Literal["off", "on", "strict"]
WorkerQueues = Literal["all", "workflows", "models"]
ModelCalls = Literal["activity", "local"]
DecisionMode = Literal["open", "signed"]
SDK_WORKFLOW_TASK_SLOTS = 100  # the SDK's own default for `max_concurrent_workflow_tasks`
__all__ = ["DEFAULT_TASK_QUEUE", "ClientSettings", "GrpcCompressionMode", "ModelCalls", "Settings", "WorkerSettings",
           "WorkflowSandbox", "tasks_fit_cache"]


def tasks_fit_cache(cached: int, tasks: int | None) -> bool:
    """Whether a worker caching `cached` workflows and running `tasks` workflow tasks at once (None: the SDK's
    default) runs at most half as many tasks as it caches, or caches nothing: what local model calls need."""
    return cached == 0 or (tasks or SDK_WORKFLOW_TASK_SLOTS) * 2 <= cached


class WorkerSettings(ClientSettings):
    """Everything a worker needs to know: a client's settings and the worker's own; each field names the variable
    it is read from.

    API keys are not fields: providers read them from `provider_env` when a worker builds them, so they
    never travel in workflow inputs, results or history, and never show in a repr or a log line.
    """

    # --- worker only (`WorkerSettings`, workers/settings.py) ---
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
        "DAGENT_MODEL_TASK_QUEUE (worker): the task queue of the model calls of the prompts this worker runs; empty "
        "= `task_queue`."))
    model_task_queue_high: str = Field(default="", description=(
        "DAGENT_MODEL_TASK_QUEUE_HIGH (worker): the high tier's own model queue (e.g. another "
        "provider's rate limit); empty = `model_task_queue`."))
    model_calls: ModelCalls = Field(default="activity", description=(
        "DAGENT_MODEL_CALLS (worker): `activity` (default: each model call its own activity, its text "
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
        "DAGENT_PROVIDER_QUEUES (worker): `provider=queue,...`: the model calls of these providers "
        "(the `provider` of `provider:model`, e.g. `anthropic`) run on their own queue; others on the tier's."))
    provider_rates: dict[str, float] = Field(default_factory=dict, description=(
        "DAGENT_PROVIDER_RATES: `provider=limit,...`: the most calls a provider's queue starts in any one "
        "second, all workers together (default: DAGENT_MODEL_RATE)."))
    model_worker_rate: float | None = Field(default=None, gt=0, description=(
        "DAGENT_MODEL_WORKER_RATE: model calls per second one worker starts (max_activities_per_second)."))
    plugins: tuple[str, ...] = Field(default=(DEMO_PLUGINS,), description=(
        "DAGENT_PLUGINS: comma-separated `module:attribute` plugin paths (empty for none)."))
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
    metrics_port: int | None = Field(default=None, ge=1, le=65535, description=(
        "DAGENT_METRICS_PORT (or `dagent worker --metrics-port`): serve Prometheus metrics on this port."))
    metrics_host: str = Field(default="127.0.0.1", description="DAGENT_METRICS_HOST: the metrics endpoint's address.")
    trace_content: bool = Field(default=False, description=(
        "DAGENT_TRACE_CONTENT: record prompt and completion text on model spans (off by default)."))
    fast_tools: bool = Field(default=True, description=(
        "DAGENT_FAST_TOOLS (worker): a tool that leaves `local` unset runs its calls as local activities "
        "once this worker has seen it finish fast (docs: Tools and plugins, fast tools); off: always a "
        "regular activity."))
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

    # --- running it in production (docs/operations.md) ---
    graceful_shutdown: timedelta = Field(default=timedelta(seconds=30), description=(
        "DAGENT_GRACEFUL_SHUTDOWN (worker): on SIGTERM/SIGINT `dagent worker` stops polling and lets running tools "
        "and model calls finish for up to this long (e.g. 30s, 2m; 0 = cancel them at once) before it exits."))
    build_id: str | None = Field(default=None, description=(
        "DAGENT_BUILD_ID (worker): this worker's build id within DAGENT_DEPLOYMENT_NAME (e.g. a git sha)."))

    @classmethod
    @env_values.naming_variables  # a bad value is a ValueError whose one line names its variable
    def from_env(cls, env: Mapping[str, str] | None = None, *, profile: str | None = None) -> WorkerSettings:
        """Settings from `env`: a client's (`ClientSettings.from_env`: the connection, from the envconfig profile
        and its TEMPORAL_* variables) and the worker's own."""
        env = dict(os.environ if env is None else env)
        defaults = cls()
        plugins = env.get("DAGENT_PLUGINS")
        return cls(
            **client_fields(env, profile),
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
            stream_text=tristate(env.get("DAGENT_STREAM_TEXT")),
            prices=env.get("DAGENT_PRICES", defaults.prices),
            workflow_sandbox=env_values.one_of(env, "DAGENT_WORKFLOW_SANDBOX", WorkflowSandbox,
                                               defaults.workflow_sandbox),
            max_cached_workflows=whole_number(env, "DAGENT_MAX_CACHED_WORKFLOWS", defaults.max_cached_workflows),
            cached_waiting=whole_number(env, "DAGENT_CACHED_WAITING", defaults.cached_waiting),
            max_workflow_tasks=positive_number(env, "DAGENT_MAX_WORKFLOW_TASKS", int),
            metrics_port=positive_number(env, "DAGENT_METRICS_PORT", int),
            metrics_host=env.get("DAGENT_METRICS_HOST", defaults.metrics_host),
            trace_content=tristate(env.get("DAGENT_TRACE_CONTENT")) is True,
            fast_tools=tristate(env.get("DAGENT_FAST_TOOLS")) is not False,
            provider_env=env,
            decision_public_key=pem(env, "DAGENT_DECISION_PUBLIC_KEY"),
            decisions=env_values.one_of(env, "DAGENT_DECISIONS", DecisionMode, "open"),
            four_eyes=tristate(env.get("DAGENT_FOUR_EYES")) is True,
            notify_config=env.get("DAGENT_NOTIFY_CONFIG", "").strip() or None,
            graceful_shutdown=parse_duration(env.get("DAGENT_GRACEFUL_SHUTDOWN", "30s"),
                                             what="DAGENT_GRACEFUL_SHUTDOWN"),
            build_id=env.get("DAGENT_BUILD_ID", "").strip() or None,
        ).check_provider_queues().check_model_calls().check_deployment()

    def check_worker_decisions(self) -> WorkerSettings:
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

    def observability(self) -> ObservabilityConfig:
        """Tracing, metrics and log exporters: the OTEL_* variables plus the metrics port."""
        return ObservabilityConfig.from_env(self.otel_env, metrics_port=self.metrics_port,
                                            metrics_host=self.metrics_host, log_level=self.log_level,
                                            temporal_spans=self.temporal_spans)

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
        """Where a prompt's fallback round goes: its provider's queue (None: no provider has one)."""
        if not self.provider_queues:
            return None
        return ModelRouting(tier_queue=self.tier_queue(tier), providers=self.provider_queues)

    def routing(self) -> WorkerRouting:
        """This worker's routing of the prompts it runs (workers/routing.py), by tier."""
        return WorkerRouting(model_local=self.model_calls == "local", tiers={tier: TierRouting(
            model_task_queue=self.model_queue_for(tier), model_routing=self.model_routing(tier))
            for tier in self.model_tiers})

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

    def check_deployment(self) -> WorkerSettings:
        """A Worker Deployment needs both its name and this worker's build id (one line if only one is set)."""
        if bool(self.deployment_name) != bool(self.build_id):
            missing = "DAGENT_BUILD_ID" if self.deployment_name else "DAGENT_DEPLOYMENT_NAME"
            raise ValueError(f"worker versioning needs DAGENT_DEPLOYMENT_NAME and DAGENT_BUILD_ID together: "
                             f"{missing} is not set")
        return self

    def check_model_calls(self) -> WorkerSettings:
        """A one-line error for local model calls with a model queue (a local activity runs on the workflow's
        worker)."""
        queues = [name for name, value in (("DAGENT_MODEL_TASK_QUEUE", self.model_task_queue),
                                           ("DAGENT_MODEL_TASK_QUEUE_HIGH", self.model_task_queue_high),
                                           ("DAGENT_PROVIDER_QUEUES", self.provider_queues)) if value]
        if self.model_calls == "local" and queues:
            raise ValueError(f"DAGENT_MODEL_CALLS=local runs model calls on the workflow's worker: unset "
                             f"{' and '.join(queues)}, or use DAGENT_MODEL_CALLS=activity")
        return self

    def check_provider_queues(self) -> WorkerSettings:
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


Settings = WorkerSettings  # the combined settings (a client's and a worker's) the CLI reads and users pass
