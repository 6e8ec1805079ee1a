"""The process `dagent worker` becomes: it parses its options with the command line, puts them in the
environment and replaces itself (same pid, same signals) with `python -m durable_agent.cli.worker_process`, which
runs the worker from the environment without loading typer, click or rich (about 8 MiB a worker would carry
for as long as it runs). Its failures read as every command's: one line on stderr and the same exit codes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import NoReturn


def say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _leave(code: int) -> NoReturn:
    """Without interpreter teardown, as every command leaves (the Temporal SDK can crash there)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> NoReturn:
    from durable_agent.agent.logging import configure_logging
    from durable_agent.cli.errors import USER_ERROR, explained, report, report_failure
    from durable_agent.cli.ui_links import with_ui_url
    from durable_agent.workers.run import run_worker
    from durable_agent.workers.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:
        report("error", exc)
        _leave(USER_ERROR)
    configure_logging(settings.log_level)
    settings = with_ui_url(settings)
    ready = os.environ.get("DAGENT_READY_FILE", "").strip()
    try:
        code = asyncio.run(explained(lambda: run_worker(settings, Path(ready) if ready else None, say), settings))
    except (KeyboardInterrupt, Exception) as exc:
        code = report_failure(exc)
    _leave(code or 0)


if __name__ == "__main__":
    main()
