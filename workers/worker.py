"""Wires workflows, activities, plugins and model providers into one Temporal worker."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.agent_activities import AgentActivities
from activities.runtime import AgentRuntime
from agent.context import DirectoryFileStore, Services
from agent.plugins import Plugin, load_plugins
from agent.pricing import PriceTable
from agent.providers.base import ModelProvider
from agent.providers.registry import resolve_chain
from workers.settings import Settings
from workflows import WORKFLOWS

STICKY_TIMEOUT = timedelta(seconds=2)
MAX_CACHED_WORKFLOWS = 64  # waiting prompts beyond this are evicted and cost no worker memory


def build_runtime(settings: Settings, *, plugins: Sequence[Plugin] | None = None,
                  providers: Mapping[str, ModelProvider | Sequence[ModelProvider]] | None = None,
                  services: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> AgentRuntime:
    """The runtime from settings; explicit `plugins`/`providers` override the configured ones."""
    env = os.environ if env is None else env
    if providers is None:
        providers = {tier: resolve_chain(spec, env) for tier, spec in settings.model_tiers.items()}
    return AgentRuntime(
        plugins=list(plugins) if plugins is not None else load_plugins(settings.plugins),
        providers=dict(providers), model_settings=settings.tier_settings, services=Services(services),
        file_store=DirectoryFileStore(Path(settings.file_dir)), prices=PriceTable.from_env(env),
        stream_text=settings.stream_text, fallback_after_attempts=settings.model_fallback_attempts,
    )


async def connect(settings: Settings) -> Client:
    return await Client.connect(settings.temporal_address, namespace=settings.namespace,
                                data_converter=settings.data_converter())


def workflow_runner(mode: str = "off") -> WorkflowRunner:
    """How workflow code runs: `off` (default), `on`, or `strict` (DAGENT_WORKFLOW_SANDBOX).

    Only this project's workflow code runs in a worker's workflows (tools, plugins and providers run in
    activities), so the sandbox guards our code alone, and CI does that: every test worker and the replay
    tests run the workflows under the `strict` sandbox, failing on any non-deterministic call. Deployed
    workers skip the sandbox's per-activation cost (about 40 % of a round with a local tool). `on` keeps
    the sandbox but passes our workflow modules through (re-importing them per workflow instance cost
    ~280 KB per cached prompt).
    """
    if mode == "strict":
        return SandboxedWorkflowRunner()
    if mode == "on":
        return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("workflows"))
    if mode == "off":
        return UnsandboxedWorkflowRunner()
    raise ValueError(f"DAGENT_WORKFLOW_SANDBOX must be off, on or strict, not {mode!r}")


def create_worker(client: Client, runtime: AgentRuntime, *, task_queue: str, **options: Any) -> Worker:
    """A worker running every workflow and activity of Durable Agent on `task_queue`.

    A crashed worker's prompts move to another worker after `STICKY_TIMEOUT` instead of the SDK's 10 s.
    """
    options.setdefault("sticky_queue_schedule_to_start_timeout", STICKY_TIMEOUT)
    options.setdefault("workflow_runner", workflow_runner(os.environ.get("DAGENT_WORKFLOW_SANDBOX", "off")))
    options.setdefault("max_cached_workflows", int(os.environ.get("DAGENT_MAX_CACHED_WORKFLOWS", MAX_CACHED_WORKFLOWS)))
    return Worker(client, task_queue=task_queue, workflows=WORKFLOWS,
                  activities=AgentActivities(runtime).all(), **options)
