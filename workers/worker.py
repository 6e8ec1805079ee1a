"""Wires workflows, activities, plugins and model providers into one Temporal worker."""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent.activities.agent_activities import AgentActivities
from durable_agent.activities.fast_tools import FastTools
from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.context import Services
from durable_agent.agent.extras import require
from durable_agent.agent.plugins import Plugin, load_plugins
from durable_agent.agent.pricing import PriceTable
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.agent.providers.registry import resolve_chain
from durable_agent.config.settings import ClientPlugin
from durable_agent.workers.notify_config import load_notify_config
from durable_agent.workers.plugin import STICKY_TIMEOUT, DurableAgentPlugin, carried_plugin, connect, workflow_runner
from durable_agent.workers.rate_limits import PacedCalls, queue_rate
from durable_agent.workers.routing import RoutingInterceptor, has_routing
from durable_agent.workers.settings import Settings, tasks_fit_cache
from durable_agent.workers.versioning import deployment_config

__all__ = ["STICKY_TIMEOUT", "build_runtime", "connect", "create_model_worker", "create_worker", "create_workers",
           "workflow_runner"]


def build_runtime(settings: Settings, *, plugins: Sequence[Plugin] | None = None,
                  providers: Mapping[str, ModelProvider | Sequence[ModelProvider]] | None = None,
                  services: Mapping[str, Any] | None = None) -> AgentRuntime:
    """The runtime from settings; explicit `plugins`/`providers` override the configured ones. A worker whose
    decision configuration is unsafe (`Settings.check_worker_decisions`) refuses here, before it polls."""
    settings.check_worker_decisions()
    if providers is None:
        providers = {tier: resolve_chain(spec, settings.provider_env) for tier, spec in settings.model_tiers.items()}
    loaded = list(plugins) if plugins is not None else load_plugins(settings.plugins)
    for plugin in loaded:
        if plugin.mcp_servers:  # refuse to start (one line) rather than fail every round's listing
            require("mcp", f"plugin '{plugin.name}' (MCP server '{plugin.mcp_servers[0].name}')")
    notify = load_notify_config(settings.notify_config, settings.provider_env)
    return AgentRuntime(
        plugins=loaded,
        providers=dict(providers), model_settings=settings.tier_settings, services=Services(services),
        file_store=settings.file_store(), prices=PriceTable.load(settings.prices),
        stream_text=settings.stream_text, fallback_after_attempts=settings.model_fallback_attempts,
        trace_content=settings.trace_content,
        decision_key=settings.decision_public_key, four_eyes=settings.four_eyes,
        notify=notify.default, notify_config=notify,
        fast_tools=FastTools(enabled=settings.fast_tools),
    )


def loaded_code_digest() -> str:
    """A digest of every loaded module's name, file size and modification time. Temporal's default build id
    (`load_default_build_id`) reads and unmarshals the bytecode of every loaded module instead, about 0.65 s
    of a worker's start on a 2-core machine; this changes whenever that code's files do, for a few ms."""
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(sys.modules):
        path = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(path, str):
            continue
        try:
            stat = os.stat(path)
        except OSError:
            continue
        digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return f"dagent-{digest.hexdigest()}"


# The worker's build id when it does not poll as a deployment version: one per process, like Temporal's default.
code_build_id = functools.cache(loaded_code_digest)


def _versioning(options: dict[str, Any], settings: Settings | None) -> dict[str, Any]:
    """`options` with `settings`' deployment version when the caller gave settings other than the plugin's (the
    plugin sets its own settings' version on every worker it configures: workers/plugin.py)."""
    if settings is not None:
        options.setdefault("deployment_config", deployment_config(settings))
    return options


def _with_plugin(client: Client, settings: Settings | None) -> Client:
    if carried_plugin(client) is None:
        settings = settings or _settings_of(client)
        client = Client(client.service_client, namespace=client.namespace, plugins=[DurableAgentPlugin(settings)])
    return client


def _settings_of(client: Client) -> Settings | None:
    """The settings of a client connected by `AgentClient.connect` (its `ClientPlugin`): a worker's as they are,
    a client's with the worker's own from the environment; None for another client."""
    plugin = next((p for p in client.config()["plugins"] if isinstance(p, ClientPlugin)), None)
    if plugin is None:
        return None
    if isinstance(plugin.settings, Settings):
        return plugin.settings
    return Settings.from_env().model_copy(update={name: getattr(plugin.settings, name)
                                                  for name in type(plugin.settings).model_fields})


def create_worker(client: Client, runtime: AgentRuntime, *, task_queue: str, settings: Settings | None = None,
                  **options: Any) -> Worker:
    """A worker running every workflow and activity of Durable Agent on `task_queue`: exactly
    `Worker(client, task_queue=..., activities=[...ours, ...yours])` on a client carrying `DurableAgentPlugin`,
    which is also how a team runs prompts next to its own workflows (pass `workflows=`, `activities=`).

    The converter, workflows, runner, deployment version and worker options come from the `DurableAgentPlugin`
    the client was connected with; a client without one is used through a view carrying one built from
    `settings` (default: `Settings.from_env()`), sharing its connection. `runtime`'s activities are registered
    once, even when the client's plugin was given a runtime too. With DAGENT_DEPLOYMENT_NAME / DAGENT_BUILD_ID
    set, the worker polls as that Worker Deployment version (workers/versioning.py).
    """
    client = _with_plugin(client, settings)
    options = _versioning(options, settings)
    if settings is not None and not has_routing(options.get("interceptors")):  # over the client plugin's settings
        options["interceptors"] = [*options.get("interceptors", ()), RoutingInterceptor(settings.routing())]
    activities = [*options.pop("activities", ()), *AgentActivities(runtime).all()]
    worker = Worker(client, task_queue=task_queue, activities=activities, **options)
    config = worker.config(active_config=True)
    if config.get("tuner") is None:  # a tuner's slots are its own to size
        runtime.fits_local_model_calls = tasks_fit_cache(config.get("max_cached_workflows", 0),
                                                         config.get("max_concurrent_workflow_tasks"))
    return worker


def create_model_worker(client: Client, runtime: AgentRuntime, *, task_queue: str, settings: Settings | None = None,
                        max_concurrent: int | None = None, worker_rate: float | None = None,
                        rate_limit: float | None = None, **options: Any) -> Worker:
    """A worker for model calls only, on their own task queue. `rate_limit`: the most model calls the queue starts
    in any one second, all its workers together: enforced by the server at `queue_rate(rate_limit)` and paced here
    by `PacedCalls` (workers/rate_limits.py). `worker_rate` (`max_activities_per_second`) and `max_concurrent`
    bound one worker. (The client's plugin registers the workflows on every worker; none starts on a model queue.)
    """
    client = _with_plugin(client, settings)
    options = _versioning(options, settings)
    return Worker(client, task_queue=task_queue, activities=[AgentActivities(runtime).model_round],
                  max_concurrent_activities=max_concurrent, max_activities_per_second=worker_rate,
                  max_task_queue_activities_per_second=queue_rate(rate_limit) if rate_limit else None,
                  interceptors=[*options.pop("interceptors", ()), *([PacedCalls()] if rate_limit else [])],
                  **options)


def create_workers(client: Client, runtime: AgentRuntime, settings: Settings) -> list[Worker]:
    """The workers a `dagent worker` process runs, after `settings.worker_queues`: `all` (the workflow queue
    and every model queue), `workflows` (workflows and tools only) or `models` (model calls only). Each drains
    for `settings.graceful_shutdown` when shut down (workers/drain.py)."""
    if settings.worker_queues == "models" and not settings.model_queues:
        raise ValueError("DAGENT_WORKER_QUEUES=models needs DAGENT_MODEL_TASK_QUEUE or DAGENT_PROVIDER_QUEUES")
    workers: list[Worker] = []
    # On shutdown (workers/drain.py) running tools and model calls finish for up to this long.
    grace = settings.graceful_shutdown
    if settings.worker_queues in ("all", "workflows"):
        workers.append(create_worker(client, runtime, task_queue=settings.task_queue, settings=settings,
                                     graceful_shutdown_timeout=grace))
    if settings.worker_queues in ("all", "models"):
        workers += [create_model_worker(client, runtime, task_queue=queue, settings=settings,
                                        max_concurrent=settings.model_concurrency,
                                        worker_rate=settings.model_worker_rate, rate_limit=limit,
                                        graceful_shutdown_timeout=grace)
                    for queue, limit in settings.model_queue_limits.items()]
    return workers
