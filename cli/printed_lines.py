"""What the lazily loaded command groups (`dagent budget`, `schedule`, `deploy`) share without importing
cli/common when `dagent --help` lists them: the --address and --json options, running a command's work to the
lines it prints, and listings."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from durable_agent.client import AgentClient

AddressOption = Annotated[str | None, typer.Option("--address", help="Temporal frontend (default: $TEMPORAL_ADDRESS)")]
JsonLinesOption = Annotated[bool, typer.Option("--json", help="Print JSON lines")]
Row = TypeVar("Row", bound="BaseModel")


def print_lines_of(address: str | None, work: Callable[[AgentClient], Awaitable[Iterable[str]]]) -> None:
    """Connect, run `work(agent)`, print its lines as they are; errors are one line (cli/common.py `run_async`)."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.client import AgentClient

    settings = load_settings(address)

    async def main() -> int:
        agent = await AgentClient.connect(settings)
        for line in await work(agent):
            console.print(line, markup=False, highlight=False)
        return 0

    run_async(main, settings)


def print_rows_of(address: str | None, rows_of: Callable[[AgentClient], Awaitable[Iterable[Row]]], *, as_json: bool,
                  line: Callable[[Row], str], header: str | None = None) -> None:
    """A listing: each row `rows_of(agent)` returns as one line (under `header`, when there is any row), or as
    one JSON document a line."""

    async def work(agent: AgentClient) -> list[str]:
        rows = list(await rows_of(agent))
        if as_json:
            return [json.dumps(row.model_dump(mode="json")) for row in rows]
        return ([header] if header and rows else []) + [line(row) for row in rows]

    print_lines_of(address, work)
