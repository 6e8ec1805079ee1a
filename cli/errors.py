"""How `dagent` runs a command's work and reports a failure: one line on stderr, a non-zero exit code.

Shared by every command (and by whatever else prints user errors): `--json` output stays the only thing
on stdout, and a script can rely on `dagent ...; echo $?`. Without typer or rich: the worker process
(cli/worker_process.py) runs through it too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from durable_agent.workers.settings import Settings

USER_ERROR = 2  # the command could not run as given (bad arguments, bad input, unknown prompt)
REFUSED = 1  # the command ran but what it asked for did not happen


def one_line(exc: BaseException) -> str:
    """A single line saying what went wrong, with the causes chained on the same line."""
    from pydantic import ValidationError  # here, not at the top: `dagent --help` imports this module

    if isinstance(exc, ValidationError):
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    elif (typer := sys.modules.get("typer")) is not None and isinstance(exc, typer.TyperException):
        text = exc.format_message()  # typer only where a command parsed its options (the worker process has none)
    else:
        text = str(exc) or type(exc).__name__
        cause, depth = exc.__cause__, 0
        while cause is not None and depth < 3:
            said = " ".join(str(cause).split())
            if said and said not in " ".join(text.split()):  # each cause once: a re-raise often repeats it
                text += f" (caused by {type(cause).__name__}: {cause})"
            cause, depth = cause.__cause__, depth + 1
    return " ".join(text.split())


def report(prefix: str, exc: BaseException) -> None:
    sys.stderr.write(f"{prefix}: {one_line(exc)}\n")
    sys.stderr.flush()


class Explained(Exception):
    """An error already turned into one line with a hint."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


async def explained(main: Callable[[], Awaitable[int | None]], settings: Settings | None) -> int | None:
    """Run `main`; the common mistakes (no server, a mistyped prompt id) become one line with a hint."""
    try:
        return await main()
    except Exception as exc:
        if settings is None:
            raise
        from durable_agent.cli import hints
        from durable_agent.client import AgentClient

        if hints.is_connect_failure(exc):
            raise Explained(hints.no_server(settings), REFUSED) from None
        if (prompt_id := hints.missing_prompt_id(exc)) is not None:
            try:
                client = (await AgentClient.connect(settings)).client
            except RuntimeError:
                client = None
            raise Explained(await hints.unknown_prompt(client, prompt_id), USER_ERROR) from None
        raise


def report_failure(exc: BaseException) -> int:
    """Say in one line on stderr why a command ended; the exit code that means."""
    from durable_agent.agent.errors import DecisionRefused  # not from durable_agent.client: a worker needs no client
    from durable_agent.agent.extras import MissingExtra, explain_missing

    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, Explained):
        report("error", exc)
        return exc.code
    if isinstance(exc, DecisionRefused):  # its own words, once: the chain below only repeats them
        from durable_agent.cli.hints import role_hint

        said = " ".join(str(exc).split())
        sys.stderr.write(f"refused: {said}{role_hint(said)}\n")
        sys.stderr.flush()
        return REFUSED
    if isinstance(exc, ValueError | LookupError | FileNotFoundError | MissingExtra):
        report("error", exc)
        return USER_ERROR
    if isinstance(exc, ModuleNotFoundError):  # an optional package imported outside extras.import_extra
        report("error", explain_missing(exc, "this command"))
        return USER_ERROR
    report("error", exc)  # connection failures, RPC errors: still one line, never a traceback
    return REFUSED


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
