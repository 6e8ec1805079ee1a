"""The process `dagent worker` becomes: it parses its options with the command line, puts them in the
environment and replaces itself (same pid, same signals) with `python -m durable_agent.cli.worker_process`, which
runs the worker from the environment without loading typer, click or rich (about 8 MiB a worker would carry
for as long as it runs). Its failures read as every command's: one line on stderr and the same exit codes."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main() -> None:
    put_working_directory_on_path()
    from durable_agent.cli.errors import load_settings, run_async
    from durable_agent.workers.run import run_worker

    settings = load_settings(None)
    ready = os.environ.get("DAGENT_READY_FILE", "").strip()
    run_async(lambda: run_worker(settings, Path(ready) if ready else None, say), settings)


def put_working_directory_on_path() -> None:
    """Plugins (DAGENT_PLUGINS=plugins.finance:plugin) import from the working directory, as `python -m` allows:
    the bare `dagent worker` runs from the console script, whose sys.path starts at the script's directory."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


if __name__ == "__main__":
    main()
