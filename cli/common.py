"""What every `dagent` command shares: the consoles, leaving, running a command's async main with one-line
errors, settings, and the common options.

Light on purpose: `dagent --help` imports this module and every command module, so nothing here (or at the
top of a command module) may import temporalio, pydantic models, jwt/cryptography or fastapi. Those are
imported inside the functions that use them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from durable_agent.cli.errors import REFUSED, USER_ERROR, report
from durable_agent.cli.printed_lines import AddressOption as AddressOption  # the commands import it from here

if TYPE_CHECKING:
    from durable_agent.workers.settings import Settings

# Text is printed as given: no emoji codes (`:name:` in a prompt or an id stays as typed; rich's table of them
# is 1 MiB of every process that prints, a worker's included).
console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

STATES = ("waiting", "running", "completed", "failed", "cancelled")  # what `dagent ls --state` takes

ProfileOption = Annotated[str | None, typer.Option(
    "--profile", help="Connection profile from the Temporal config file (default: $TEMPORAL_PROFILE)")]
RoleOption = Annotated[list[str] | None, typer.Option(
    "--role", help="A role you hold, for calls whose approvers name `role:...` (repeatable; counted only "
    "without decision keys, like --by)")]


def exit_now(code: int = 0) -> NoReturn:
    """Leave without running interpreter teardown: the Temporal SDK can crash there (sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    follow = sys.modules.get("durable_agent.cli.follow")  # only a command that followed asked questions
    if follow is not None:
        follow.discard_at_exit()
    os._exit(code)


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


def run_async(main: Callable[[], Awaitable[int | None]], settings: Settings | None = None) -> None:
    import asyncio

    from durable_agent.agent.errors import DecisionRefused  # not from durable_agent.client: a worker needs no client
    from durable_agent.agent.extras import MissingExtra, explain_missing

    try:
        code = asyncio.run(explained(main, settings))
    except KeyboardInterrupt:
        code = 130
    except Explained as exc:
        report("error", exc)
        code = exc.code
    except DecisionRefused as exc:
        report("refused", exc)
        code = REFUSED
    except (ValueError, LookupError, FileNotFoundError, MissingExtra) as exc:
        report("error", exc)
        code = USER_ERROR
    except ModuleNotFoundError as exc:  # an optional package imported outside extras.import_extra
        report("error", explain_missing(exc, "this command"))
        code = USER_ERROR
    except Exception as exc:  # connection failures, RPC errors: still one line, never a traceback
        report("error", exc)
        code = REFUSED
    exit_now(code or 0)


def load_settings(address: str | None, profile: str | None = None) -> Settings:
    from durable_agent.agent.logging import configure_logging
    from durable_agent.cli.ui_links import with_ui_url
    from durable_agent.workers.settings import Settings

    try:
        settings = Settings.from_env(profile=profile)
    except ValueError as exc:
        report("error", exc)
        exit_now(USER_ERROR)
    if address:
        settings = settings.model_copy(update={"temporal_address": address})
    configure_logging(settings.log_level)
    return with_ui_url(settings)  # links to the UI the server really has


def decider(by: str) -> str:
    """The person `--by` names: `user:alice` is `alice`; a role is refused (a decision records a person)."""
    from durable_agent.agent.identity import person_id, person_problem

    problem = person_problem(by)
    if problem is not None:
        raise typer.BadParameter(f"--by {problem}; hold the role with --role", param_hint="--by")
    return person_id(by) or by


def require_free_port(host: str, port: int, option: str) -> None:
    """Exit with one line when `host:port` cannot be listened on (taken, or not allowed)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            report("error", OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc} — choose another "
                                    f"{option}"))
            exit_now(REFUSED)
