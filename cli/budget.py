"""`dagent budget ...`: period budgets of users and conversations (client/budgets.py, docs/operations.md).

    dagent budget set user:alice --tokens 200000 --period day
    dagent budget set conversation:c1 --cost 5 --period month --ask --approver role:finance
    dagent budget set user:alice --clear
    dagent budget show user:alice | ls
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli.errors import exit_user_error
from durable_agent.cli.printed_lines import AddressOption, JsonLinesOption, print_lines_of, print_rows_of

if TYPE_CHECKING:  # `dagent --help` lists this group without loading pydantic
    from durable_agent.agent.period_budgets import BudgetLimit, LedgerView

budget_app = typer.Typer(help="Budgets of users and conversations per day, week or month (tokens and/or cost).",
                         no_args_is_help=True)

PrincipalArgument = Annotated[str, typer.Argument(help="user:<id> or conversation:<id>")]


def describe(view: LedgerView) -> list[str]:
    """The budget and this period's spend, for people."""
    from durable_agent.agent.period_budgets import ADJECTIVE

    standing = view.standing
    limit = standing.limit
    if limit is None:
        return [f"{standing.principal}: no budget"]
    lines = [f"{standing.principal}: {limit.describe()} (when spent: {limit.on_exhausted}"
             f"{', approvers ' + ', '.join(limit.approvers) if limit.approvers else ''})"]
    if standing.period_start is not None and standing.period_end is not None:
        lines.append(f"  {ADJECTIVE[limit.period]} period {standing.period_start:%Y-%m-%d %H:%M} to "
                     f"{standing.period_end:%Y-%m-%d %H:%M} UTC")
    if limit.max_tokens is not None:
        extra = f" (+{standing.extra_tokens} granted)" if standing.extra_tokens else ""
        lines.append(f"  tokens: {standing.spent_tokens} spent of {limit.max_tokens}{extra}")
    if limit.max_cost is not None:
        extra = f" (+{standing.extra_cost:g} granted)" if standing.extra_cost else ""
        lines.append(f"  cost: {standing.spent_cost:.4f} spent of {limit.max_cost:g}{extra}")
    if (refusal := standing.refusal()) is not None:
        lines.append(f"  spent: {refusal}")
    return lines


@budget_app.command("set")
def budget_set(
    principal: PrincipalArgument,
    tokens: Annotated[int | None, typer.Option("--tokens", help="Input + output tokens per period")] = None,
    cost: Annotated[float | None, typer.Option("--cost", help="Cost per period (the price table's currency)")] = None,
    period: Annotated[str, typer.Option(help="day, week or month (UTC calendar)")] = "day",
    ask: Annotated[bool, typer.Option("--ask", help="When spent, ask an approver for more instead of stopping")
                   ] = False,
    approver: Annotated[list[str] | None, typer.Option("--approver", help="Who may grant more: user:<id> or "
                                                                         "role:<name> (repeat for several)")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the budget")] = False,
    by: Annotated[str | None, typer.Option(help="Recorded as who set it")] = None,
    address: AddressOption = None,
) -> None:
    """Set (or --clear) the budget of a user or a conversation; prompts under it reserve from it each round."""
    from durable_agent.client.budgets import BudgetError, budget_limit, check_principal, set_budget

    limit: BudgetLimit | None = None
    try:  # a bad spec is one line, before connecting
        check_principal(principal)
        if clear and (tokens is not None or cost is not None or ask):
            raise BudgetError("--clear takes no limits")
        if not clear:
            limit = budget_limit(period=period, max_tokens=tokens, max_cost=cost,
                                 on_exhausted="ask" if ask else "stop", approvers=approver or [])
    except BudgetError as exc:
        exit_user_error(exc)

    async def work(agent: object) -> list[str]:
        view = await set_budget(agent, principal, limit, by=by)  # type: ignore[arg-type]
        return describe(view)

    print_lines_of(address, work)


@budget_app.command("show")
def budget_show(principal: PrincipalArgument, address: AddressOption = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """A budget and its spend in the current period."""
    from durable_agent.client.budgets import BudgetError, check_principal, show_budget

    try:
        check_principal(principal)
    except BudgetError as exc:
        exit_user_error(exc)

    async def work(agent: object) -> list[str]:
        view = await show_budget(agent, principal)  # type: ignore[arg-type]
        return [view.model_dump_json()] if as_json else describe(view)

    print_lines_of(address, work)


@budget_app.command("ls")
def budget_ls(address: AddressOption = None, as_json: JsonLinesOption = False) -> None:
    """Every user and conversation with a budget."""
    from durable_agent.client.budgets import list_budgets

    print_rows_of(address, list_budgets, as_json=as_json, line=lambda row: (
        f"{row.principal:<40} {row.limit.describe()}  when spent: {row.limit.on_exhausted}"))
