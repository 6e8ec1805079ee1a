"""Wires workflows, activities, plugins and model providers into one Temporal worker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.agent_activities import AgentActivities
from activities.runtime import AgentRuntime
from agent.context import DirectoryFileStore, Services
from agent.plugins import Plugin, load_plugins
from agent.pricing import PriceTable
from agent.providers.base import ModelProvider
from agent.providers.registry import resolve_chain
from workers.plugin import STICKY_TIMEOUT, DurableAgentPlugin, carried_plugin, workflow_runner
from workers.settings import Settings

__all__ = ["STICKY_TIMEOUT", "build_runtime", "connect", "create_worker", "workflow_runner"]


def build_runtime(settings: Settings, *, plugins: Sequence[Plugin] | None = None,
                  providers: Mapping[str, ModelProvider | Sequence[ModelProvider]] | None = None,
                  services: Mapping[str, Any] | None = None) -> AgentRuntime:
    """The runtime from settings; explicit `plugins`/`providers` override the configured ones."""
    if providers is None:
        providers = {tier: resolve_chain(spec, settings.provider_env) for tier, spec in settings.model_tiers.items()}
    return AgentRuntime(
        plugins=list(plugins) if plugins is not None else load_plugins(settings.plugins),
        providers=dict(providers), model_settings=settings.tier_settings, services=Services(services),
        file_store=DirectoryFileStore(Path(settings.file_dir)), prices=PriceTable.load(settings.prices),
        stream_text=settings.stream_text, fallback_after_attempts=settings.model_fallback_attempts,
        decision_key=settings.decision_public_key,
    )


async def connect(settings: Settings) -> Client:
    """A client carrying `DurableAgentPlugin(settings)`: the project's converter, and for its workers the rest."""
    return await Client.connect(settings.temporal_address, namespace=settings.namespace,
                                plugins=[DurableAgentPlugin(settings)])


def create_worker(client: Client, runtime: AgentRuntime, *, task_queue: str, settings: Settings | None = None,
                  **options: Any) -> Worker:
    """A worker running every workflow and activity of Durable Agent on `task_queue`.

    The converter, workflows, runner and worker options come from the `DurableAgentPlugin` the client was
    connected with; a client without one is used through a view carrying one built from `settings`
    (default: `Settings.from_env()`), sharing its connection.
    """
    if carried_plugin(client) is None:
        client = Client(client.service_client, namespace=client.namespace, plugins=[DurableAgentPlugin(settings)])
    return Worker(client, task_queue=task_queue, activities=AgentActivities(runtime).all(), **options)
