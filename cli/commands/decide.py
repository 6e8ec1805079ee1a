"""`dagent approve`, `reject` and `pending`: the calls waiting for a person, and deciding them."""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli import common
from durable_agent.cli.common import AddressOption, ProfileOption, RoleOption, console, err_console
from durable_agent.cli.errors import REFUSED

if TYPE_CHECKING:
    from durable_agent.agent.models import ToolOutput
    from durable_agent.cli import decisions
    from durable_agent.client import AgentClient
    from durable_agent.workers.settings import Settings

app = typer.Typer()

PAGE = 100  # `dagent pending` lists the calls of this many waiting prompts unless --limit says otherwise
MAX_PAGE = 1000  # client/pending.py PAGE_SIZE: the most one visibility page holds
LOGIN_USER = os.environ.get("USER", "cli")

PendingCallArgument = Annotated[str | None, typer.Argument(help="The pending call; omit with --all")]
DeciderOption = Annotated[str, typer.Option(help="Your user id (a person, `alice` or `user:alice`; never a role)")]


def _deciding(address: str | None, profile: str | None, tool_call_id: str | None, every: bool,
              by: str) -> tuple[Settings, str]:
    """The settings and the deciding person of `approve` and `reject`, once the options both take are checked."""
    settings = common.load_settings(address, profile)
    if (tool_call_id is None) == (not every):
        raise typer.BadParameter("give a TOOL_CALL_ID or --all (not both)")
    return settings, common.decider(by)


async def _decide(client: AgentClient, prompt_id: str, tool_call_id: str | None, how: decisions.Decide,
                  verb: str) -> list[ToolOutput | None]:
    """Decide one call (or, without an id, every call pending now, in record order) and print each decision as
    it is taken: the call's result, or, when its batch still waits, the decision and how many others it waits
    for. A sub-agent's call (`<call>/<call>`) is followed to the prompt that runs it. With several calls, the
    ones that waited are followed until they ran (or `decisions.ONCE_RUN_SECONDS`), and printed again."""
    from durable_agent.cli import decisions
    from durable_agent.cli.render import describe_output
    from durable_agent.client import DecisionRefused

    handle = client.prompt(prompt_id)
    call_ids = [tool_call_id] if tool_call_id else [p.tool_call_id for p in await handle.pending_approvals()]
    if not call_ids:
        raise DecisionRefused(f"prompt {prompt_id} has no call waiting for approval")
    outcomes: list[ToolOutput | None] = []
    for call_id in call_ids:
        resolved = await decisions.decide(client, prompt_id, call_id, how)
        if resolved is not None and decisions.is_waiting_for_batch(resolved):
            console.print(decisions.taken_line(resolved, await decisions.waiting_count(handle, call_id)))
        else:
            console.print(describe_output(resolved) if resolved else verb)
        outcomes.append(resolved)
    if len(call_ids) > 1 and any(decisions.is_waiting_for_batch(o) for o in outcomes):
        ended = await decisions.once_run(handle, outcomes)
        for before, after in zip(outcomes, ended, strict=True):
            if decisions.is_waiting_for_batch(before) and after is not None:
                console.print(describe_output(after))
        outcomes = ended
    return outcomes


def _failed_after_approval(outcomes: list[ToolOutput | None]) -> int:
    """Exit code of `approve`: 0 once every decision was taken (a call still waiting for the rest of its batch
    included); 1, with one line on stderr, when an approved call ran and failed."""
    failed = [o for o in outcomes if o is not None and o.result is not None and o.result.type == "error"]
    if not failed:
        return 0
    first = failed[0]
    error = first.result.error if first.result is not None and first.result.type == "error" else ""
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    err_console.print(f"error: {first.tool} [{first.id}] was approved but failed: {error}{more}", markup=False)
    return REFUSED


@app.command()
def approve(
    prompt_id: str, tool_call_id: PendingCallArgument = None, address: AddressOption = None,
    profile: ProfileOption = None, by: DeciderOption = LOGIN_USER, role: RoleOption = None,
    input: Annotated[str | None, typer.Option("--input", help="Corrected arguments as a JSON object")] = None,
    every: Annotated[bool, typer.Option("--all", help="Approve every pending call of the prompt")] = False,
) -> None:
    """Approve a pending tool call (or --all of them); waits for and prints the result."""
    from durable_agent.cli import api_decisions
    from durable_agent.client import AgentClient

    settings, by = _deciding(address, profile, tool_call_id, every, by)
    try:
        corrected = json.loads(input) if input else None
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"--input is not valid JSON: {exc}") from exc
    if corrected is not None and not isinstance(corrected, dict):
        raise typer.BadParameter("--input must be a JSON object")
    if corrected is not None and every:
        raise typer.BadParameter("--input corrects one call; it cannot be used with --all")

    approve_one = partial(api_decisions.approve, by=by, input=corrected, roles=role or ())

    async def main() -> int:
        client = await AgentClient.connect(settings)
        return _failed_after_approval(await _decide(client, prompt_id, tool_call_id, approve_one, "approved"))

    common.run_async(main, settings)


@app.command()
def reject(
    prompt_id: str, tool_call_id: PendingCallArgument = None, address: AddressOption = None,
    profile: ProfileOption = None, by: DeciderOption = LOGIN_USER, role: RoleOption = None,
    reason: Annotated[str | None, typer.Option(help="Why; the model sees it")] = None,
    every: Annotated[bool, typer.Option("--all", help="Reject every pending call of the prompt")] = False,
) -> None:
    """Reject a pending tool call (or --all of them); the model sees the rejection and its reason."""
    from durable_agent.cli import api_decisions
    from durable_agent.client import AgentClient

    settings, by = _deciding(address, profile, tool_call_id, every, by)

    reject_one = partial(api_decisions.reject, by=by, reason=reason, roles=role or ())

    async def main() -> int:
        await _decide(await AgentClient.connect(settings), prompt_id, tool_call_id, reject_one, "rejected")
        return 0

    common.run_async(main, settings)


@app.command()
def pending(
    address: AddressOption = None,
    profile: ProfileOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's prompts")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the calls as one JSON document")] = False,
    as_person: Annotated[str | None, typer.Option(
        "--as", help="Only the calls this person sees: their own prompts' and those whose approvers name them "
        "or one of their --role")] = None,
    role: RoleOption = None,
    limit: Annotated[int, typer.Option(
        help=f"The calls of at most this many waiting prompts (1 to {MAX_PAGE}; 0: all of them)")] = PAGE,
    cursor: Annotated[str | None, typer.Option(help="Start at this page (the cursor the last page printed)")] = None,
) -> None:
    """List every call waiting for approval, addressed from its top prompt (a sub-agent's as <call>/<call>).

    One page at a time: how many prompts wait in all, and the command for the next page, go to stderr."""
    from durable_agent.agent.identity import Identity
    from durable_agent.client import AgentClient
    from durable_agent.client.pending import may_see

    settings = common.load_settings(address, profile)
    who = Identity.of(common.decider(as_person), role or ()) if as_person else None
    if not 0 <= limit <= MAX_PAGE:
        raise typer.BadParameter(f"--limit must be between 0 and {MAX_PAGE}", param_hint="--limit")
    if cursor and not limit:
        raise typer.BadParameter("--cursor pages: give a --limit too", param_hint="--cursor")

    async def main() -> int:
        found = await (await AgentClient.connect(settings)).pending(user_id=user, limit=limit or None, cursor=cursor)
        if who is not None:
            found.rows = [row for row in found.rows if may_see(row, who)]
        for prompt_id in found.unanswered:
            err_console.print(f"warning: prompt {prompt_id} is waiting but did not answer (is a worker running "
                              "for its task queue?); its calls are not listed")
        rows = found.rows
        if found.next_cursor is not None:
            err_console.print(f"{found.total} prompts wait in all; this page lists the calls of the first {limit}. "
                              f"Next page: dagent pending --limit {limit} --cursor {found.next_cursor} "
                              "(--limit 0 lists them all)", markup=False, highlight=False)
        if as_json:  # plain JSON: rich's print_json takes seconds per thousand rows
            sys.stdout.write(json.dumps([row.model_dump(mode="json") for row in rows], indent=2) + "\n")
            return 0
        if not rows:
            console.print("no prompt is waiting for approval")
        lines = []
        for row in rows:
            path = f"  path={' -> '.join([row.prompt_id, *row.path])}" if row.path else ""  # a sub-agent's call
            lines.append(f"{row.prompt_id}  user={row.user_id}  {row.tool_call_id}  {row.tool} "
                         f"{json.dumps(row.input)}  — {row.reason}{path}")
        if lines:  # one print: rich's per-call cost adds up over thousands of rows
            console.print("\n".join(lines))
        return 0

    common.run_async(main, settings)
