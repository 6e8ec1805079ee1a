"""A worker process's life: check the store, connect, poll every queue it serves, say it is ready, and on the
first SIGTERM or Ctrl-C drain what runs (a second one stops at once). `dagent worker` runs it in a process of
its own that loads none of the command line (`cli/worker_process.py`)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from durable_agent.workers.settings import SDK_WORKFLOW_TASK_SLOTS, Settings


async def run_worker(settings: Settings, ready_file: Path | None, say: Callable[[str], None]) -> int:
    """Run until stopped; `say` prints the worker's few lines for a person (the start line, draining)."""
    from durable_agent.config.connection import describe_security
    from durable_agent.config.durations import format_duration
    from durable_agent.config.observability import flush_traces
    from durable_agent.config.storage.stores import check_store
    from durable_agent.workers.drain import StopSignals, drain
    from durable_agent.workers.readiness import serve_readiness
    from durable_agent.workers.search_attributes import check_search_attributes
    from durable_agent.workers.worker import build_runtime, connect, create_workers

    await check_store(settings.blob_objects())  # refuse to start without a usable store
    runtime = build_runtime(settings)
    client = await connect(settings, metrics=True)
    await check_search_attributes(client)  # refuse in one line rather than leave sub-agents' prompts stuck
    stop = StopSignals(on_force=lambda: say("second signal: stopping now"))
    try:
        async with AsyncExitStack() as workers:
            running = create_workers(client, runtime, settings)
            # What start-up built (modules, schemas, the workers) leaves the cycle collector's sight (`gc.freeze`):
            # every later full collection, such as the one after waiting prompts leave the cache (workers/resting.py),
            # then scans only what the work since made, about 6 ms instead of 40.
            gc.collect()
            gc.freeze()
            for one in running:
                await workers.enter_async_context(one)
            await workers.enter_async_context(serve_readiness(
                client, running, ready_file, address=settings.temporal_address,
                workflow_queue=settings.task_queue, stopping=stop.stopping))
            queues = [settings.task_queue] if settings.worker_queues != "models" else []
            queues += settings.model_queues if settings.worker_queues != "workflows" else []
            # local model calls run with the workflow tasks the worker runs at once: as many model calls at once
            local = (f" model_calls=local workflow_tasks={settings.workflow_task_slots or SDK_WORKFLOW_TASK_SLOTS}"
                     if settings.model_calls == "local" else "")
            say(f"worker on {settings.temporal_address} ({describe_security(settings.temporal_profile)}) "
                f"queues={','.join(queues)} store={settings.blob_objects().location} "
                f"codec={'on' if settings.codec_keys else 'off'} plugins={','.join(settings.plugins)} "
                f"models={settings.model_tiers}{local}")
            if settings.metrics_port is not None:
                say(f"metrics on http://{settings.observability().metrics_bind}/metrics")
            await stop.wait()
            say(f"draining: running tools and model calls have up to {format_duration(settings.graceful_shutdown)} "
                "to finish (signal again to stop now)")
            await drain(running, settings.graceful_shutdown)
    finally:
        await runtime.mcp.aclose()  # stops the stdio MCP servers this worker started
        flush_traces()
    return 0
