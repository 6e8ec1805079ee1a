"""`dagent worker-ready`: exit 0 while a `dagent worker --ready-file PATH` is polling, 1 otherwise (a probe).

    dagent worker --ready-file /tmp/dagent-worker.ready &
    dagent worker-ready --ready-file /tmp/dagent-worker.ready   # ready: pid 7 polling agent since 2026-...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

READY_FILE_ENV = "DAGENT_READY_FILE"
ReadyFileOption = Annotated[Path | None, typer.Option(
    envvar=READY_FILE_ENV, help="The worker's ready file (default: $DAGENT_READY_FILE)")]

app = typer.Typer()


@app.command("worker-ready")
def worker_ready(ready_file: ReadyFileOption = None) -> None:
    """Exit 0 if the worker writing READY_FILE polls its task queues, else 1 with the reason (docs/operations.md)."""
    from durable_agent.cli.common import console, err_console, exit_now
    from durable_agent.workers.readiness import NotReady, check_ready

    if ready_file is None:
        err_console.print(f"give --ready-file or set {READY_FILE_ENV} (the path the worker was started with)")
        exit_now(2)
    try:
        state = check_ready(ready_file)
    except NotReady as exc:
        err_console.print(str(exc), markup=False)
        exit_now(1)
    console.print(f"ready: pid {state.pid} polling {','.join(state.queues)} on {state.address} "
                  f"since {state.since.isoformat(timespec='seconds')}")
    exit_now(0)
