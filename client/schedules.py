"""Recurring agents on Temporal Schedules: a schedule starts an ordinary prompt on a cron or interval spec.

Each run is a `PromptWorkflow` with its own id (`dagent-run-<schedule id>-<time>`: Temporal appends the nominal
time, and the reserved `dagent-` prefix keeps every caller's id off it, agent/ids.py) and its own record,
listed like any prompt and searchable by schedule (Temporal sets `TemporalScheduledById` on every run:
`scheduled_prompts`). The Temporal server owns the timing (time zone, jitter, overlap, catch-up after an
outage); Durable Agent adds nothing to it. Runs start without a workflow version, so a schedule created long
ago still runs each prompt with the code's current behaviour (by patch markers), not the creator's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from durable_agent.agent.ids import reserved_problem, schedule_run_id
from durable_agent.agent.models import ModelTier
from durable_agent.agent.period_budgets import principals_for
from durable_agent.client.priority import prompt_priority
from durable_agent.config.durations import format_duration, parse_duration
from durable_agent.workflows.details import prompt_static_details, prompt_summary
from durable_agent.workflows.names import PROMPT_STATE, PROMPT_WORKFLOW, USER_ID
from durable_agent.workflows.protocol import PromptRequest

if TYPE_CHECKING:
    from durable_agent.client._client import AgentClient

__all__ = ["OVERLAP_POLICIES", "ScheduleError", "ScheduleView", "create_schedule", "list_schedules",
           "schedule_handle", "schedule_spec", "scheduled_prompts", "view_schedule"]

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"]
OVERLAP_POLICIES: dict[str, ScheduleOverlapPolicy] = {
    name: ScheduleOverlapPolicy[name.upper()] for name in get_args(Overlap)}


MAX_INTERVAL = timedelta(days=3660)  # ten years
MAX_JITTER = timedelta(days=366)
SPEC_MEMO = "dagent_spec"  # the spec as given, shown by `dagent schedule ls`
USER_MEMO = "dagent_user"  # who the runs start as (the HTTP API lets only them or an admin change it)
TEXT_MEMO = "dagent_text"  # what each run is asked (its summary: `dagent schedule ls` shows it)


class ScheduleError(ValueError):
    """A schedule that cannot be created or changed, in one line (a bad spec, an unknown id, a taken id)."""


class ScheduleView(BaseModel):
    id: str
    spec: str  # e.g. "cron 0 9 * * 1-5 (Europe/Paris)" or "every 1h jitter 5m"
    paused: bool
    next_runs: list[datetime] = Field(default_factory=list)
    recent_runs: list[str] = Field(default_factory=list)  # prompt (workflow) ids, newest last
    note: str | None = None
    user_id: str | None = None
    text: str | None = None  # what each run is asked, as its summary shows it (`user: input`)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def schedule_spec(*, cron: str | None = None, every: str | None = None, offset: str | None = None,
                  jitter: str | None = None, time_zone: str | None = None) -> ScheduleSpec:
    """A Temporal `ScheduleSpec` from one cron expression or one interval; `ScheduleError` (one line) if bad.
    Cron has five fields (minute hour day-of-month month day-of-week) or a shorthand like `@daily`."""
    if bool(cron) == bool(every):
        raise ScheduleError("give exactly one of a cron expression (--cron '0 9 * * 1-5') or an interval (--every 1h)")
    if time_zone:
        try:
            ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"unknown time zone {time_zone!r} (use an IANA name such as Europe/Paris)") from None
    jitter_value = _bounded(jitter, "jitter", MAX_JITTER) if jitter else None
    if every:
        interval = _bounded(every, "interval", MAX_INTERVAL)
        if interval < timedelta(seconds=1):
            raise ScheduleError(f"interval must be at least 1s, not {every!r}")
        offset_value = _bounded(offset, "offset", interval) if offset else None
        intervals = [ScheduleIntervalSpec(every=interval, offset=offset_value)]
        return ScheduleSpec(intervals=intervals, jitter=jitter_value, time_zone_name=time_zone)
    assert cron is not None
    fields = cron.split()
    if not (cron.strip().startswith("@") and len(fields) == 1) and len(fields) != 5:
        raise ScheduleError(f"cron expression must have 5 fields (minute hour day month weekday), not {cron!r}")
    if offset:
        raise ScheduleError("--offset applies to an interval (--every), not to a cron expression")
    return ScheduleSpec(cron_expressions=[cron], jitter=jitter_value, time_zone_name=time_zone)


def _bounded(text: str, what: str, most: timedelta) -> timedelta:
    """A duration no longer than `most` (an overflowing one is refused too, never a 500)."""
    try:
        value = parse_duration(text, what=what)
    except OverflowError:
        value = timedelta.max
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None
    if value > most:
        raise ScheduleError(f"{what} must be at most {format_duration(most)}, not {text!r}")
    return value


async def create_schedule(agent: AgentClient, schedule_id: str, input: str | None, *, user_id: str = "scheduler",
                          cron: str | None = None, every: str | None = None, offset: str | None = None,
                          jitter: str | None = None, time_zone: str | None = None, overlap: Overlap = "skip",
                          model: ModelTier = "normal", instructions: str | None = None,
                          max_rounds: int | None = None, paused: bool = False, note: str | None = None,
                          priority_key: int | None = None) -> ScheduleHandle:
    """A schedule that starts a prompt with `input` (None: a system-initiated prompt) as `user_id` on `spec`.
    `overlap`: what a run due while the previous one still runs (e.g. waits for approval) does: `skip` it
    (default), `buffer_one`, `buffer_all`, `cancel_other`, `terminate_other` or `allow_all`."""
    if (problem := reserved_problem("schedule id", schedule_id)) is not None:
        raise ScheduleError(problem)
    spec = schedule_spec(cron=cron, every=every, offset=offset, jitter=jitter, time_zone=time_zone)
    if overlap not in OVERLAP_POLICIES:
        raise ScheduleError(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, not {overlap!r}")
    # No workflow version (runs follow the code's current behaviour: patch markers) and no model routing: each run
    # gets the routing of the worker that runs it (workers/routing.py), not the one this client had when it was made.
    options: dict[str, Any] = {} if max_rounds is None else {"max_rounds": max_rounds}
    # Each run reserves from its user's ledger: a budget set (or spent) after the schedule was made still applies,
    # which a lookup now, as `AgentClient.start` does, would miss. A user without a budget: the ledger says yes.
    request = PromptRequest(user_id=user_id, model=model, input=input, instructions=instructions,
                            budgets=principals_for(user_id, None), **options)
    action = ScheduleActionStartWorkflow(
        PROMPT_WORKFLOW, request, id=schedule_run_id(schedule_id), task_queue=agent.settings.task_queue,
        static_summary=prompt_summary(user_id, input), static_details=prompt_static_details(user_id, input),
        typed_search_attributes=TypedSearchAttributes([SearchAttributePair(PROMPT_STATE, "running"),
                                                       SearchAttributePair(USER_ID, user_id)]),
        priority=prompt_priority(user_id, priority_key=priority_key),
    )
    schedule = Schedule(action=action, spec=spec, policy=SchedulePolicy(overlap=OVERLAP_POLICIES[overlap]),
                        state=ScheduleState(paused=paused, note=note))
    try:
        return await agent.client.create_schedule(schedule_id, schedule,
                                                  memo={SPEC_MEMO: describe_spec(spec), USER_MEMO: user_id,
                                                        TEXT_MEMO: prompt_summary(user_id, input)})
    except ScheduleAlreadyRunningError:
        raise ScheduleError(f"schedule {schedule_id} exists already (dagent schedule delete {schedule_id})") from None
    except RPCError as exc:
        raise ScheduleError(f"schedule {schedule_id}: {_one_line(exc.message)}") from None


def describe_spec(spec: ScheduleSpec) -> str:
    parts = [f"cron {c}" for c in spec.cron_expressions]
    parts += [f"every {format_duration(i.every)}" for i in spec.intervals]
    parts += ["calendar" for _ in spec.calendars] if not spec.cron_expressions else []
    jitter = f" jitter {format_duration(spec.jitter)}" if spec.jitter else ""
    zone = f" ({spec.time_zone_name})" if spec.time_zone_name else ""
    return (", ".join(parts) or "(no spec)") + jitter + zone


async def view_schedule(agent: AgentClient, schedule_id: str) -> ScheduleView:
    try:
        described = await agent.client.get_schedule_handle(schedule_id).describe()
    except RPCError as exc:
        raise ScheduleError(f"schedule {schedule_id}: {_one_line(exc.message)}") from None
    info, schedule = described.info, described.schedule
    spec = await described.memo_value(SPEC_MEMO, describe_spec(schedule.spec))  # as given (the server keeps calendars)
    user = await described.memo_value(USER_MEMO, None)
    text = await described.memo_value(TEXT_MEMO, None)
    return ScheduleView(id=schedule_id, spec=str(spec), paused=schedule.state.paused, user_id=user, text=text,
                        next_runs=list(info.next_action_times[:3]), note=schedule.state.note or None,
                        recent_runs=[a.action.workflow_id for a in info.recent_actions
                                     if hasattr(a.action, "workflow_id")])


async def list_schedules(agent: AgentClient, *, user_id: str | None = None) -> list[ScheduleView]:
    """Every schedule of the namespace that starts prompts (with `user_id`, only those whose runs start as that
    user: the others are not described)."""
    views: list[ScheduleView] = []
    async for entry in await agent.client.list_schedules():
        action = entry.schedule.action if entry.schedule else None
        if action is not None and getattr(action, "workflow", None) != PROMPT_WORKFLOW:
            continue
        if user_id is not None and await entry.memo_value(USER_MEMO, None) != user_id:
            continue
        views.append(await view_schedule(agent, entry.id))
    return views


async def scheduled_prompts(agent: AgentClient, schedule_id: str) -> list[str]:
    """Ids of the prompts a schedule started (Temporal's `TemporalScheduledById`), newest first."""
    query = f"WorkflowType = '{PROMPT_WORKFLOW}' AND TemporalScheduledById = '{schedule_id.replace(chr(39), '')}'"
    return [execution.id async for execution in agent.client.list_workflows(query)]


async def schedule_handle(agent: AgentClient, schedule_id: str) -> ScheduleHandle:
    """The handle of an existing schedule (`ScheduleError` if there is none by that id)."""
    await view_schedule(agent, schedule_id)
    return agent.client.get_schedule_handle(schedule_id)
