"""The `dagent` script and `python -m durable_agent.cli`. A bare `dagent worker` (every setting from the
environment, as a container runs it) starts the worker at once without loading the command line; everything
else goes to the typer app (cli/app.py)."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["worker"]:
        from durable_agent.cli.worker_process import main as run_worker

        run_worker()
    from durable_agent.cli.app import main as run_command

    run_command()
