"""`dagent schedule ...`: recurring prompts on Temporal Schedules (client/schedules.py, docs/operations.md).

    dagent schedule create daily-report "Summarise yesterday's orders" --cron "0 9 * * 1-5" --tz Europe/Paris
    dagent schedule create sweep "Check the queue" --every 15m --jitter 1m --overlap skip
    dagent schedule ls | show ID | runs ID | pause ID | unpause ID | trigger ID | delete ID
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from operator import methodcaller
from typing import Annotated, Any

import typer

from durable_agent.cli.printed_lines import AddressOption, JsonLinesOption, print_lines_of, print_rows_of

schedule_app = typer.Typer(help="Recurring prompts on Temporal Schedules (cron or interval).", no_args_is_help=True)

IdArgument = Annotated[str, typer.Argument(help="Schedule id")]


@schedule_app.command("create")
def schedule_create(
    schedule_id: IdArgument,
    text: Annotated[str | None, typer.Argument(help="The prompt each run starts with (omit: system-initiated)")] = None,
    cron: Annotated[str | None, typer.Option(help="Cron expression, e.g. '0 9 * * 1-5'")] = None,
    every: Annotated[str | None, typer.Option(help="Interval, e.g. 15m, 1h, 1d")] = None,
    offset: Annotated[str | None, typer.Option(help="Offset of an --every interval, e.g. 5m")] = None,
    jitter: Annotated[str | None, typer.Option(help="Random delay up to this, e.g. 2m")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA time zone of the spec (default UTC)")] = None,
    overlap: Annotated[str, typer.Option(help="If the previous run still runs: skip, buffer_one, buffer_all, "
                                              "cancel_other, terminate_other, allow_all")] = "skip",
    user: Annotated[str, typer.Option(help="User id the prompts run as")] = "scheduler",
    model: Annotated[str, typer.Option(help="Model tier: normal or high")] = "normal",
    priority: Annotated[int | None, typer.Option(help="Task priority 1 (first) to 5 (last)")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused")] = False,
    note: Annotated[str | None, typer.Option(help="A note shown with the schedule")] = None,
    address: AddressOption = None,
) -> None:
    """Create a schedule that starts a prompt on a cron or interval spec."""
    from durable_agent.cli.common import exit_user_error
    from durable_agent.client.schedules import OVERLAP_POLICIES, ScheduleError, create_schedule, schedule_spec

    if model not in ("normal", "high"):
        raise typer.BadParameter("model must be 'normal' or 'high'")
    try:  # a bad spec is one line, before connecting
        schedule_spec(cron=cron, every=every, offset=offset, jitter=jitter, time_zone=tz)
        if overlap not in OVERLAP_POLICIES:
            raise ScheduleError(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, not {overlap!r}")
    except ScheduleError as exc:
        exit_user_error(exc)

    async def work(agent: object) -> list[str]:
        await create_schedule(agent, schedule_id, text, user_id=user, cron=cron, every=every,  # type: ignore[arg-type]
                              offset=offset, jitter=jitter, time_zone=tz, overlap=overlap,  # type: ignore[arg-type]
                              model=model, paused=paused, note=note, priority_key=priority)  # type: ignore[arg-type]
        return [f"schedule {schedule_id} created"]

    print_lines_of(address, work)


@schedule_app.command("ls")
def schedule_ls(address: AddressOption = None, as_json: JsonLinesOption = False) -> None:
    """Schedules that start prompts: id, spec, paused or not, next run, and who asks what."""
    from durable_agent.client.schedules import list_schedules

    print_rows_of(address, list_schedules, as_json=as_json, header=SCHEDULE_HEADER, line=lambda v: (
        f"{v.id:<24} {('paused ' if v.paused else '') + v.spec:<32} "
        f"{f'{v.next_runs[0]:%Y-%m-%d %H:%M:%S %Z}' if v.next_runs and not v.paused else '-':<24} "
        f"{v.text or v.user_id or '-'}"))


SCHEDULE_HEADER = f"{'SCHEDULE':<24} {'SPEC':<32} {'NEXT RUN':<24} ASKS"


@schedule_app.command("runs")
def schedule_runs(schedule_id: IdArgument, address: AddressOption = None) -> None:
    """The prompts a schedule started (newest first): `dagent show <id>` for each record."""
    from durable_agent.client.schedules import schedule_handle, scheduled_prompts

    async def work(agent: object) -> list[str]:
        await schedule_handle(agent, schedule_id)  # type: ignore[arg-type]
        return await scheduled_prompts(agent, schedule_id)  # type: ignore[arg-type]

    print_lines_of(address, work)


def _simple_command(name: str, verb: str, act: Callable[[Any], Awaitable[None]], help_text: str) -> None:
    """Register `dagent schedule <name> ID`: one call on the schedule's handle, then `schedule ID <verb>`."""

    def command(schedule_id: IdArgument, address: AddressOption = None) -> None:
        from durable_agent.client.schedules import schedule_handle

        async def work(agent: object) -> list[str]:
            await act(await schedule_handle(agent, schedule_id))  # type: ignore[arg-type]
            return [f"schedule {schedule_id} {verb}"]

        print_lines_of(address, work)

    command.__doc__ = help_text
    schedule_app.command(name)(command)


for _name, _verb, _act, _help in [
    ("pause", "paused", methodcaller("pause", note="paused by dagent"), "Stop starting runs until unpaused."),
    ("unpause", "unpaused", methodcaller("unpause", note="unpaused by dagent"), "Start runs again on the spec."),
    ("trigger", "triggered", methodcaller("trigger"), "Start one run now (subject to the overlap policy)."),
    ("delete", "deleted", methodcaller("delete"), "Delete the schedule (prompts it started are kept)."),
]:
    _simple_command(_name, _verb, _act, _help)
