"""`dagent`: the command line of Durable Agent (server, worker, run, approvals, inspection, quick start).

The commands live in cli/commands/* (and cli/deploy.py, cli/schedule.py); `COMMANDS` names where each one is,
and `LazyGroup` imports a command's module only when that command runs or a help page lists it. Those modules
import only typer and cli/common.py at their top, so `dagent --help` loads neither temporalio nor pydantic.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from durable_agent.cli.common import exit_now, exit_user_error
from durable_agent.cli.errors import REFUSED, report

# name -> "module:attribute": a command function in a module's `app`, or a sub-app (`typer.Typer`) of its own.
# In the order `dagent --help` lists them. A new command or group is one line here.
COMMANDS: dict[str, str] = {
    "server": "durable_agent.cli.commands.services:server",
    "worker": "durable_agent.cli.commands.services:worker",
    "run": "durable_agent.cli.commands.prompts:run",
    "watch": "durable_agent.cli.commands.prompts:watch",
    "chat": "durable_agent.cli.commands.prompts:chat",
    "show": "durable_agent.cli.commands.prompts:show",
    "approve": "durable_agent.cli.commands.decide:approve",
    "reject": "durable_agent.cli.commands.decide:reject",
    "pending": "durable_agent.cli.commands.decide:pending",
    "ls": "durable_agent.cli.commands.inspect:ls",
    "stuck": "durable_agent.cli.commands.inspect:stuck",
    "cancel": "durable_agent.cli.commands.prompts:cancel",
    "codec-server": "durable_agent.cli.commands.services:codec-server",
    "api": "durable_agent.cli.commands.services:api",
    "demo": "durable_agent.cli.commands.services:demo",
    "worker-ready": "durable_agent.cli.worker_ready:worker-ready",
    # groups
    "store": "durable_agent.cli.commands.store:store_app",
    "deploy": "durable_agent.cli.deploy:deploy_app",
    "schedule": "durable_agent.cli.schedule:schedule_app",
    "budget": "durable_agent.cli.budget:budget_app",
    "file": "durable_agent.cli.file:file_app",
}


_BUILT: dict[str, TyperGroup] = {}  # module -> its `app`, built


def load_command(name: str) -> typer.core.TyperCommand | TyperGroup:
    """The click command `COMMANDS[name]` names, built by typer from its module (imported now)."""
    module_name, attribute = COMMANDS[name].split(":")
    module = __import__(module_name, fromlist=[attribute])  # not importlib: `python -X importtime` logs this
    found = getattr(module, attribute, None)
    if isinstance(found, typer.Typer):  # a group of its own (get_group: no completion options, as add_typer)
        command = typer.main.get_group(found)
    else:  # one of the commands in the module's `app`, all built at once (typer builds every one each time)
        if module_name not in _BUILT:
            _BUILT[module_name] = typer.main.get_group(module.app)
        command = _BUILT[module_name].commands[attribute]
    command.name = name
    return command  # type: ignore[return-value]


def listing_entry(name: str) -> typer.core.TyperCommand | TyperGroup:
    """What the root help shows of `COMMANDS[name]` (its name and help), without typer building its options:
    a real command everywhere else. Falls back to the real command for anything it cannot read."""
    module_name, attribute = COMMANDS[name].split(":")
    module = __import__(module_name, fromlist=[attribute])
    found = getattr(module, attribute, None)
    if isinstance(found, typer.Typer):
        info = found.info
        if isinstance(_given(info.help), str):
            return TyperGroup(name=name, help=info.help, short_help=_given(info.short_help),
                              hidden=bool(_given(info.hidden)), deprecated=bool(_given(info.deprecated)),
                              rich_help_panel=_given(info.rich_help_panel))
        return load_command(name)
    for info in module.app.registered_commands:
        callback = info.callback
        if callback is not None and (info.name or callback.__name__.replace("_", "-")) == attribute:
            doc = info.help if info.help is not None else inspect.getdoc(callback)
            return typer.core.TyperCommand(name=name, help=inspect.cleandoc(doc) if doc else doc,
                                           short_help=info.short_help, hidden=info.hidden,
                                           deprecated=info.deprecated, rich_help_panel=info.rich_help_panel)
    return load_command(name)


def _given(value: Any) -> Any:
    """A Typer() argument as given (typer wraps the ones left at their default)."""
    return None if isinstance(value, typer.models.DefaultPlaceholder) else value


class LazyGroup(TyperGroup):
    """The root group: lists `COMMANDS` without importing them; builds a command when it is asked for. While
    it prints its own help, a command not built yet is shown from `listing_entry` (typer building every
    command's options was most of `dagent --help`)."""

    _listing = False

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]  # then any added eagerly

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> Any:  # type: ignore[override]
        """A mistyped command, with typer's suggestion (typer looks only at `self.commands`, still empty here)."""
        name = args[0] if args else None
        if name is not None and not name.startswith("-") and self.get_command(ctx, name) is None:
            from difflib import get_close_matches

            matches = get_close_matches(name, self.list_commands(ctx))
            ctx.fail(f"No such command {name!r}." + (f" Did you mean {', '.join(map(repr, matches))}?" if matches
                                                      else ""))
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> typer.core.TyperCommand | None:  # type: ignore[override]
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if self._listing:
                return listing_entry(cmd_name)  # type: ignore[return-value]
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)  # type: ignore[return-value]


app = typer.Typer(cls=LazyGroup, help="Durable Agent: LLM agents that never lose their place.", no_args_is_help=True,
                  add_completion=False)


@app.callback()
def _root() -> None:
    pass


def main() -> None:
    """The `dagent` entry point: usage errors are one line on stderr too (exit code 2)."""
    from durable_agent.agent.extras import MissingExtra, explain_missing

    if len(sys.argv) <= 1:
        app()  # no arguments: typer prints the help
    try:
        app(standalone_mode=False)
    except typer.Abort:
        exit_now(130)
    except (typer.TyperException, MissingExtra) as exc:
        exit_user_error(exc)
    except ModuleNotFoundError as exc:  # an optional package imported outside extras.import_extra
        exit_user_error(explain_missing(exc, "this command"))
    except Exception as exc:
        report("error", exc)
        exit_now(REFUSED)
    exit_now(0)


if __name__ == "__main__":
    main()
