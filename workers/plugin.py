"""`DurableAgentPlugin`: the one Temporal configuration of Durable Agent, for client, worker and replayer.

    client = await Client.connect(address, plugins=[DurableAgentPlugin(settings, runtime=runtime)])
    worker = Worker(client, task_queue=settings.task_queue)  # inherits the client's plugin
    replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(settings)])

It carries the data converter (pydantic JSON + external payload storage), the workflows, the activities
(when given a runtime), the workflow runner, the worker's cache and sticky-queue options and the workflow
failure types. A worker inherits the plugin of the client it is built on (Temporal applies a client's
plugins to its workers) and must be built on such a client: a worker uses its client's data converter,
and without external storage it could not read the payloads kept outside history. Applied twice, the
plugin registers each workflow and activity once. Worker options it sets (runner, cache size, deployment
version) come from `Settings`.

It composes with what a team already configured, as Temporal's own contrib plugins do: every value it sets is
a function of the existing one. The data converter keeps the team's codec, failure converter and external
storage (config/storage/converter.py); the workflow runner keeps a team's sandbox restrictions and adds our
passthrough; workflows, activities, interceptors and failure types are appended; a `deployment_config` or
`max_concurrent_workflow_tasks` given to the `Worker` wins over the settings'.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from temporalio.client import Client
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, UnsandboxedWorkflowRunner, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agent.agent.errors import DurableAgentError
from durable_agent.agent.logging import get_logger
from durable_agent.config.connection import connect_client
from durable_agent.config.observability import flush_traces, metrics_runtime, temporal_plugins
from durable_agent.workers.resting import WatchedRunner, evict_resting, eviction_door
from durable_agent.workers.routing import RoutingInterceptor, has_routing
from durable_agent.workers.search_attributes import MissingSearchAttributes, check_search_attributes
from durable_agent.workers.settings import Settings, WorkflowSandbox, tasks_fit_cache
from durable_agent.workers.versioning import check_versioning_behaviors, deployment_config
from durable_agent.workflows.sdk_private import activity_name

if TYPE_CHECKING:  # clients (CLI, API) never load the activities, their providers and the MCP SDK
    from temporalio.worker import Worker

    from durable_agent.activities.runtime import AgentRuntime

log = get_logger(__name__)
PLUGIN_NAME = "durable-agent"
# Our activities pace their heartbeats themselves (each one reaching the server is a billable action: liveness at
# 0.8 x the heartbeat timeout, live details only when asked for; activities/heartbeats.py). This short throttle
# only keeps the beats they do send from being held back, e.g. the one that fetches a cancellation.
HEARTBEAT_THROTTLE = timedelta(milliseconds=500)
STICKY_TIMEOUT = timedelta(seconds=2)  # a crashed worker's prompts move on after 2 s, not the SDK's 10 s
T = TypeVar("T")
C = TypeVar("C", WorkerConfig, ReplayerConfig)
FAILURE_TYPES: tuple[type[BaseException], ...] = (DurableAgentError,)


def workflow_runner(mode: WorkflowSandbox = "on") -> WorkflowRunner:
    """How workflow code runs, for a worker given no runner of its own: `compose_runner(mode)(None)`."""
    return compose_runner(mode)(None)


def compose_runner(mode: WorkflowSandbox = "on") -> Callable[[WorkflowRunner | None], WorkflowRunner]:
    """The worker's runner as a function of the one it was given, for mode `on` (default), `strict` or `off`
    (Settings.workflow_sandbox).

    `on` is Temporal's sandbox with the whole `durable_agent` package passed through: every workflow run
    still gets a fresh sandbox (restricted builtins, no I/O, no `datetime.now()`), but our modules are not
    re-imported per run (that cost ~280 KB per cached prompt; the workflows' failure types import agent.errors).
    Only this project's workflow code runs in a worker's workflows (tools, plugins and providers run in
    activities). `strict` passes nothing of ours through; every test worker and the replay tests run under it,
    failing on any non-deterministic call. `off` (an opt-in, for those who measured its gain on their load:
    docs/performance-next.md) runs every workflow of the worker unsandboxed, saving the sandbox's
    per-activation cost but losing its guard in production.

    A `SandboxedWorkflowRunner` given keeps its restrictions and runner class (a team's
    `with_passthrough_modules("mylib")` stays); a runner of another kind is the team's choice and is kept."""
    def compose(existing: WorkflowRunner | None) -> WorkflowRunner:
        if isinstance(existing, WatchedRunner):  # the plugin already configured this worker
            return existing
        if mode == "off":
            return UnsandboxedWorkflowRunner()
        if existing is not None and not isinstance(existing, SandboxedWorkflowRunner):
            return existing
        base = existing or SandboxedWorkflowRunner()
        restrictions = base.restrictions
        if mode == "on":
            restrictions = restrictions.with_passthrough_modules("durable_agent")
        return dataclasses.replace(base, restrictions=restrictions)  # a subclass of the team's: its class stays
    if mode not in ("on", "strict", "off"):
        raise ValueError(f"workflow sandbox must be off, on or strict, not {mode!r}")
    return compose


def _append_missing(items: Sequence[T]) -> Callable[[Sequence[T] | None], Sequence[T]]:
    """Append `items` not already configured, so the plugin can be applied by client and worker both."""
    def append(existing: Sequence[T] | None) -> Sequence[T]:
        present = list(existing or [])
        return present + [item for item in items if item not in present]
    return append


def _our_workflows(existing: Sequence[type] | None) -> Sequence[type]:
    """The configured workflows and ours: loaded when a worker is configured, so a client never imports them."""
    from durable_agent.workflows import WORKFLOWS

    return _append_missing(WORKFLOWS)(existing)


def _activities(runtime: AgentRuntime | None) -> Callable[[Sequence[Callable[..., object]] | None],
                                                          Sequence[Callable[..., object]]] | None:
    """Our activities appended to the worker's, except those a worker already has under the same name (given to
    `Worker(activities=...)` by `create_worker`, or by a second application of the plugin)."""
    if runtime is None:
        return None

    def append(existing: Sequence[Callable[..., object]] | None) -> Sequence[Callable[..., object]]:
        from durable_agent.activities.agent_activities import AgentActivities

        present = list(existing or [])
        names = {activity_name(function) for function in present}
        return present + [f for f in AgentActivities(runtime).all() if activity_name(f) not in names]
    return append


class DurableAgentPlugin(SimplePlugin):
    """Durable Agent's converter, workflows, activities, runner and failure types, from one `Settings`."""

    def __init__(self, settings: Settings | None = None, *, runtime: AgentRuntime | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self.runtime = runtime
        super().__init__(
            PLUGIN_NAME,
            data_converter=self.settings.data_converter,
            workflows=_our_workflows,
            activities=_activities(runtime),
            workflow_runner=compose_runner(self.settings.workflow_sandbox),
            workflow_failure_exception_types=_append_missing(FAILURE_TYPES),
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """See base class. Also sets the sticky-queue timeout, the workflow cache size and (unless the worker was
        given its own) the workflow tasks it runs at once (`Settings.workflow_task_slots`), and on a versioned
        worker (a `deployment_config` with worker versioning) registers our workflows' versioned subclasses."""
        if carried_plugin(config["client"]) is None:  # type: ignore[typeddict-item]
            raise ValueError("build the worker on a client connected with plugins=[DurableAgentPlugin(...)]: "
                             "the worker needs that client's data converter")
        config = self._routed(super().configure_worker(config))  # the worker says where its prompts' model calls run
        config["sticky_queue_schedule_to_start_timeout"] = STICKY_TIMEOUT
        config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["max_cached_workflows"] = self.settings.max_cached_workflows
        runner = config.get("workflow_runner")
        evicts = self.settings.cached_waiting < self.settings.max_cached_workflows
        if evicts and runner is not None and not isinstance(runner, WatchedRunner):
            config["workflow_runner"] = WatchedRunner(runner)  # this worker's own `RestingRuns`
        slots = self.settings.workflow_task_slots
        if slots is not None and config.get("max_concurrent_workflow_tasks") is None and config.get("tuner") is None:
            config["max_concurrent_workflow_tasks"] = slots
        if config.get("deployment_config") is None and not config.get("build_id") \
                and not config.get("use_worker_versioning"):  # a worker given its own versioning keeps it
            config["deployment_config"] = deployment_config(self.settings)
        if config.get("deployment_config") is None and not config.get("build_id"):
            from durable_agent.workers.worker import code_build_id  # a cheap build id, not the SDK's 0.65 s one

            config["build_id"] = code_build_id()
        deployment = config.get("deployment_config")
        if deployment is not None and deployment.use_worker_versioning:
            from durable_agent.workflows.versioning.deployment import versioned_workflows

            config["workflows"] = versioned_workflows(config.get("workflows") or [])
        if not config.get("use_worker_versioning"):  # the legacy build-id versioning has rules of its own
            check_versioning_behaviors(config.get("workflows") or [], deployment)
        if self.runtime is not None and config.get("tuner") is None:  # a tuner's slots are its own to size
            self.runtime.fits_local_model_calls = tasks_fit_cache(config.get("max_cached_workflows", 0),
                                                                  config.get("max_concurrent_workflow_tasks"))
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """See base class. Also routes replayed prompts as this plugin's workers route them."""
        return self._routed(super().configure_replayer(config))

    def _routed(self, config: C) -> C:
        if not has_routing(config.get("interceptors")):
            config["interceptors"] = [*config.get("interceptors", ()), RoutingInterceptor(self.settings.routing())]
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """See base class. While the worker runs, its prompts waiting for a person beyond the most recent
        `Settings.cached_waiting` leave its workflow cache (workers/resting.py)."""
        sweeper: asyncio.Task[None] | None = None
        try:
            runner = worker.config(active_config=True).get("workflow_runner")
            if isinstance(runner, WatchedRunner):
                if (evict := eviction_door(worker)) is not None:
                    sweeper = asyncio.create_task(evict_resting(runner.runs, evict, self.settings.cached_waiting))
                else:
                    log.warning("workflow_cache.no_eviction_door", task_queue=worker.task_queue,
                                detail="this temporalio has no request_workflow_eviction: waiting prompts stay cached")
            await super().run_worker(worker, functools.partial(_run_checked, next=next))
        finally:
            if sweeper is not None:
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
            flush_traces()  # the worker's spans (and its process's client spans) reach the exporter


async def _run_checked(worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
    """Run the worker while its namespace's search attributes are checked; when one is missing, shut it down and
    raise the check's one line. (Raising before the worker runs would leave `Worker.shutdown` waiting for ever.)"""
    running = asyncio.ensure_future(next(worker))
    try:
        await check_search_attributes(worker.client)
    except MissingSearchAttributes:
        await worker.shutdown()
        with contextlib.suppress(Exception):
            await running
        raise
    await running


def carried_plugin(client: Client) -> DurableAgentPlugin | None:
    """The `DurableAgentPlugin` a client was connected with, if any (its workers inherit it)."""
    return next((p for p in client.config()["plugins"] if isinstance(p, DurableAgentPlugin)), None)


__all__ = ["FAILURE_TYPES", "PLUGIN_NAME", "STICKY_TIMEOUT", "DurableAgentPlugin", "carried_plugin", "compose_runner",
           "workflow_runner"]


async def connect(settings: Settings, *, metrics: bool = False) -> Client:
    """A client carrying `DurableAgentPlugin(settings)`: the project's converter, and for its workers the rest;
    with OpenTelemetry's plugin when tracing is configured. Connected through the settings' envconfig profile
    (TLS, API key); `TemporalConnectError` says what failed. `metrics=True` (workers) also exports the
    Temporal runtime's metrics and the agent's (Prometheus endpoint or OTLP)."""
    config = settings.observability()
    return await connect_client(settings.temporal_address, settings.namespace, settings.temporal_profile,
                                settings.grpc_compression,
                                plugins=[DurableAgentPlugin(settings), *temporal_plugins(config)],
                                runtime=metrics_runtime(config) if metrics else None)
