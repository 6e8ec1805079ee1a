"""Running a command's work, without typer or rich (the worker process uses it too, cli/worker_process.py): its
settings, its async main with one-line failures, and leaving."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn

from durable_agent.cli.errors import USER_ERROR, explained, report, report_failure

if TYPE_CHECKING:
    from durable_agent.workers.settings import Settings


def exit_now(code: int = 0) -> NoReturn:
    """Leave without running interpreter teardown: the Temporal SDK can crash there (sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    answer_line = sys.modules.get("durable_agent.cli.answer_line")  # only a command that followed asked questions
    if answer_line is not None:
        answer_line.discard_at_exit()
    os._exit(code)


def exit_user_error(exc: BaseException) -> NoReturn:
    """One line on stderr, exit code 2: the command cannot run as given."""
    report("error", exc)
    exit_now(USER_ERROR)


async def until_interrupted() -> None:
    """Return on SIGINT or SIGTERM (a long-running command's end)."""
    import asyncio
    import signal

    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()


def run_async(main: Callable[[], Awaitable[int | None]], settings: Settings | None = None) -> None:
    import asyncio

    try:
        code = asyncio.run(explained(main, settings))
    except (KeyboardInterrupt, Exception) as exc:
        code = report_failure(exc)
    exit_now(code or 0)


def load_settings(address: str | None, profile: str | None = None) -> Settings:
    from durable_agent.agent.logging import configure_logging
    from durable_agent.cli.ui_links import with_ui_url
    from durable_agent.workers.settings import Settings

    try:
        settings = Settings.from_env(profile=profile)
    except ValueError as exc:
        exit_user_error(exc)
    if address:
        settings = settings.model_copy(update={"temporal_address": address})
    configure_logging(settings.log_level)
    return with_ui_url(settings)  # links to the UI the server really has
