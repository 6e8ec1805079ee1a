"""What the lazily loaded command groups (`dagent budget`, `schedule`, `deploy`) share without importing
cli/common when `dagent --help` lists them: the --address option, and running a command's work to the lines it
prints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from durable_agent.client import AgentClient

AddressOption = Annotated[str | None, typer.Option("--address", help="Temporal frontend (default: $TEMPORAL_ADDRESS)")]


def print_lines_of(address: str | None, work: Callable[[AgentClient], Awaitable[Iterable[str]]]) -> None:
    """Connect, run `work(agent)`, print its lines as they are; errors are one line (cli/app.py `_run_async`)."""
    from durable_agent.cli.common import _run_async, _settings, console
    from durable_agent.client import AgentClient

    settings = _settings(address)

    async def main() -> int:
        agent = await AgentClient.connect(settings)
        for line in await work(agent):
            console.print(line, markup=False, highlight=False)
        return 0

    _run_async(main, settings)
