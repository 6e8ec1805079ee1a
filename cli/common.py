"""What every `dagent` command shares: the consoles, leaving, running a command's async main with one-line
errors, settings, and the common options.

Light on purpose: `dagent --help` imports this module and every command module, so nothing here (or at the
top of a command module) may import temporalio, pydantic models, jwt/cryptography or fastapi. Those are
imported inside the functions that use them.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from durable_agent.cli.errors import REFUSED, report
from durable_agent.cli.errors import Explained as Explained  # the commands use these from here
from durable_agent.cli.errors import exit_now as exit_now
from durable_agent.cli.errors import exit_user_error as exit_user_error
from durable_agent.cli.errors import explained as explained
from durable_agent.cli.errors import load_settings as load_settings
from durable_agent.cli.errors import run_async as run_async
from durable_agent.cli.printed_lines import AddressOption as AddressOption  # the commands import it from here

# Text is printed as given: no emoji codes (`:name:` in a prompt or an id stays as typed; rich's table of them
# is 1 MiB of every process that prints, a worker's included).
console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

STATES = ("waiting", "running", "completed", "stopped", "failed", "cancelled")  # what `dagent ls --state` takes

ProfileOption = Annotated[str | None, typer.Option(
    "--profile", help="Connection profile from the Temporal config file (default: $TEMPORAL_PROFILE)")]
RoleOption = Annotated[list[str] | None, typer.Option(
    "--role", help="A role you hold, for calls whose approvers name `role:...` (repeatable; counted only "
    "without decision keys, like --by)")]


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
        # As the server binds (Go sets SO_REUSEADDR): a port whose last connections are in TIME_WAIT after a crash
        # is free to listen on, while one another process listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen()
        except OSError as exc:
            report("error", OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc} — choose another "
                                    f"{option}"))
            exit_now(REFUSED)
