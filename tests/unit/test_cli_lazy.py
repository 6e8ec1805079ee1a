"""`dagent`'s root group is lazy (cli/app.py `COMMANDS`): every registered command builds, `--help` lists them
all in order with their help, and a mistyped command still gets typer's suggestion. Real `dagent` processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from durable_agent.cli.app import COMMANDS, app, load_command

DAGENT = [sys.executable, "-m", "durable_agent.cli"]
ENV = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}


def _dagent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT, *args], env=ENV, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_registered_command_builds_with_its_name_and_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    assert command.help or command.short_help, name


def test_help_lists_every_command_in_order() -> None:
    done = _dagent("--help")
    assert done.returncode == 0, done.stderr
    positions = [done.stdout.find(f"│ {name} ") for name in COMMANDS]  # a row of the Commands panel
    assert -1 not in positions, done.stdout
    assert positions == sorted(positions)
    group = typer.main.get_command(app)
    assert group.list_commands(typer.Context(group)) == list(COMMANDS)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args", "message"), [
    (["pendng"], "error: No such command 'pendng'. Did you mean 'pending'?"),
    (["store", "chek"], "error: No such command 'chek'. Did you mean 'check'?"),
    (["nosuchthing"], "error: No such command 'nosuchthing'."),
])
def test_a_mistyped_command_is_one_line_with_a_suggestion(args: list[str], message: str) -> None:
    done = _dagent(*args)
    assert done.returncode == 2
    assert done.stderr.strip() == message and done.stdout == ""


def test_the_root_help_shows_the_commands_as_built(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The root help reads each command's name and help without building its options (`listing_entry`): the
    page is the same as with every command built."""
    monkeypatch.setenv("COLUMNS", "100")

    def page(group: typer.core.TyperGroup) -> str:
        group.main(["--help"], prog_name="dagent", standalone_mode=False)
        return capsys.readouterr().out

    lazy = typer.main.get_command(app)
    built = typer.main.get_command(app)
    for name in COMMANDS:
        built.commands[name] = load_command(name)  # type: ignore[attr-defined]
    listed = page(lazy)  # type: ignore[arg-type]
    assert lazy.commands == {}  # type: ignore[attr-defined]  (nothing was built to list them)
    assert listed == page(built)  # type: ignore[arg-type]
    assert "pending" in listed and "Recurring prompts on Temporal Schedules" in listed


def test_the_consoles_print_text_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    """No emoji codes (cli/common.py): a ':name:' in a prompt or an id stays as typed, and rich's emoji table
    is never loaded."""
    from durable_agent.cli.common import console, err_console

    console.print("deploy :rocket: to q:smile:1")
    err_console.print("queue :warning:")
    printed = capsys.readouterr()
    assert printed.out == "deploy :rocket: to q:smile:1\n" and printed.err == "queue :warning:\n"
