"""`dagent ls` and `stuck`: recent prompts, and those whose workflow task keeps failing."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from durable_agent.cli.common import STATES, AddressOption, ProfileOption, console, load_settings, run_async

app = typer.Typer()


@app.command("ls")
def list_prompts(
    address: AddressOption = None,
    profile: ProfileOption = None,
    state: Annotated[str | None, typer.Option(help=f"Only prompts in this state: {', '.join(STATES)}")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's prompts")] = None,
    limit: Annotated[int, typer.Option(help="At most this many", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as one JSON document")] = False,
) -> None:
    """List recent prompts: state, user, age and summary, those waiting for approval first."""
    from rich.text import Text

    from durable_agent.cli.follow import STATE_STYLES
    from durable_agent.cli.ls import age, recent_prompts
    from durable_agent.cli.render import state_words
    from durable_agent.client import AgentClient

    settings = load_settings(address, profile)
    if state is not None and state not in STATES:
        raise typer.BadParameter(f"state must be one of {', '.join(STATES)}")

    async def main() -> int:
        client = await AgentClient.connect(settings)
        rows = await recent_prompts(client.client, state=state, user=user, limit=limit)
        if as_json:
            console.print_json(json.dumps([row.model_dump(mode="json") for row in rows]))
            return 0
        if not rows:
            console.print("no prompts" + (" in that state" if state else "") + (f" of {user}" if user else ""))
        for row in rows:
            style = STATE_STYLES.get(row.state, "")
            console.print(Text.assemble((f"{row.id:<26} ", "bold"), (f"{state_words(row.state):<21} ", style),
                                        f"{(row.user or '-'):<12} ", (f"{age(row.started_at):>4}  ", "dim"),
                                        row.summary))
        return 0

    run_async(main, settings)


@app.command()
def stuck(address: AddressOption = None, profile: ProfileOption = None,
          as_json: Annotated[bool, typer.Option("--json", help="Print them as one JSON document")] = False) -> None:
    """List prompts and conversations whose workflow task keeps failing, with the reason (exit 1 if any)."""
    from durable_agent.client import AgentClient

    settings = load_settings(address, profile)

    async def main() -> int:
        problems = await (await AgentClient.connect(settings)).stuck()
        if as_json:
            console.print_json(json.dumps([dataclasses.asdict(problem) for problem in problems]))
        elif not problems:
            console.print("no prompt or conversation is stuck")
        for problem in [] if as_json else problems:
            console.print(f"{problem.workflow_id}  {problem.workflow_type}  attempt {problem.attempt}: "
                          f"{problem.reason}")
        return 1 if problems else 0

    run_async(main, settings)
