"""The dev server's command line: our search attributes and dynamic config as `temporal server start-dev`
arguments, for `DevServer` and for the SDK's own launcher (`WorkflowEnvironment.start_local`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from durable_agent.workflows.search_attributes import SEARCH_ATTRIBUTE_TYPES

#: Custom search attributes every prompt workflow may set (name -> Temporal type), from workflows/names.py.
SEARCH_ATTRIBUTES: dict[str, str] = SEARCH_ATTRIBUTE_TYPES

#: Dynamic config passed to the dev server (values are JSON, as the CLI requires).
#: Updates are needed for approve/steer; the transfer-processor poll rate keeps many concurrent
#: prompts (benchmarks) from queueing behind the default rate limit.
DYNAMIC_CONFIG: dict[str, str] = {
    "frontend.enableUpdateWorkflowExecution": "true",
    "history.transferProcessorMaxPollRPS": "10000",
    # Flag a workflow whose task failed twice in a row (`dagent stuck` lists them by this attribute).
    "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute": "2",
    # Eager execution (issue 17): an activity scheduled on the workflow's own task queue is handed to the
    # worker in the reply to its workflow task (no poll round trip), and a prompt started by a client whose
    # process runs a worker on the queue gets its first workflow task in the start reply. Server 1.32's dev
    # server has both on already (its `activity_eager_execution` / `workflow_eager_execution` metrics count
    # them); set here so they stay on whatever the binary's defaults become.
    "system.enableActivityEagerExecution": "true",
    "system.enableEagerWorkflowStart": "true",
    # One partition per task queue: a model queue's rate limit is a token bucket per partition, each with a
    # burst of its own, and `DAGENT_MODEL_RATE` / `DAGENT_PROVIDER_RATES` hold only on one (workers/rate_limits.py).
    # A single server gains nothing from more partitions.
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
    # The dev server re-reads the search-attribute registry from its database on every visibility write and
    # every request that carries search attributes (so one created at run time is usable at once). Ours are
    # all registered by `--search-attribute` at start; cached, they cost each prompt ~3-5 % less server CPU.
    "system.forceSearchAttributesCacheRefreshOnRead": "false",
}


def _flags(flag: str, values: Mapping[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in (flag, f"{key}={value}")]


def search_attribute_args(attributes: Mapping[str, str] = SEARCH_ATTRIBUTES) -> list[str]:
    """``--search-attribute NAME=Type`` for each attribute."""
    return _flags("--search-attribute", attributes)


def dev_server_args(
    *,
    port: int,
    ui_port: int | None,
    db_file: str | None,
    namespace: str = "default",
    ip: str = "127.0.0.1",
    log_level: str = "warn",
) -> list[str]:
    """Arguments after ``temporal``: ``ui_port=None`` runs headless; ``db_file=None`` keeps state in memory."""
    args = ["server", "start-dev", "--ip", ip, "--port", str(port), "--log-level", log_level]
    if namespace != "default":  # "default" is always created
        args += ["--namespace", namespace]
    if db_file is not None:
        args += ["--db-filename", str(Path(db_file).absolute())]
    if ui_port is None:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port)]
    return args + extra_args_for_start_local()


def extra_args_for_start_local() -> list[str]:
    """For ``WorkflowEnvironment.start_local(dev_server_extra_args=...)`` (which passes the address, database, UI
    and log options itself): our search attributes and dynamic config."""
    return search_attribute_args() + _flags("--dynamic-config-value", DYNAMIC_CONFIG)

