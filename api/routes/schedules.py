"""HTTP routes for recurring prompts on Temporal Schedules (client/schedules.py): each schedule's runs start
as the principal who created it; only that principal or an admin may see, trigger, pause or delete it. A caller
without the admin role has a quota of schedules (`schedules_per_user`) and a shortest interval
(`min_schedule_interval_seconds`; a cron expression runs at most once a minute)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Response
from pydantic import Field

from durable_agent.agent.models import ModelTier
from durable_agent.agent.strict import StrictModel
from durable_agent.api.auth import Principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, Config, Service
from durable_agent.api.service import AgentService
from durable_agent.client.schedules import (
    Overlap,
    ScheduleError,
    ScheduleView,
    create_schedule,
    list_schedules,
    schedule_handle,
    view_schedule,
)
from durable_agent.config.durations import format_duration, parse_duration

router = APIRouter(tags=["schedules"])
ScheduleId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]


class CreateSchedule(StrictModel):
    id: ScheduleId
    input: str | None = Field(default=None, min_length=1, max_length=100_000,
                              description="Each run's prompt; omit for a system-initiated prompt.")
    cron: str | None = Field(default=None, description="e.g. `0 9 * * 1-5`")
    every: str | None = Field(default=None, description="e.g. `15m`, `1h`, `1d`")
    offset: str | None = None
    jitter: str | None = None
    time_zone: str | None = Field(default=None, description="IANA name, e.g. `Europe/Paris` (default UTC).")
    overlap: Overlap = "skip"
    model: ModelTier = "normal"
    paused: bool = False


async def _own(service: AgentService, caller: Principal, schedule_id: str) -> ScheduleView:
    try:
        view = await view_schedule(service.agent, schedule_id)
    except ScheduleError as exc:
        raise Problem("not-found", str(exc)) from None
    if view.user_id != caller.id and not caller.is_admin:
        raise Problem("not-allowed", f"schedule {schedule_id} belongs to another user")
    return view


async def _within_limits(body: CreateSchedule, caller: Principal, service: AgentService, config: ApiConfig) -> None:
    """A non-admin's quota and shortest interval (422 problems)."""
    if caller.is_admin:
        return
    shortest = timedelta(seconds=config.min_schedule_interval_seconds)
    if body.every:
        try:
            interval = parse_duration(body.every, what="interval")
        except (ValueError, OverflowError) as exc:
            raise Problem("invalid-request", str(exc)) from None
        if interval < shortest:
            raise Problem("invalid-request", f"interval must be at least {format_duration(shortest)} (only an admin "
                                             f"may schedule more often), not {body.every!r}")
    own = await list_schedules(service.agent, user_id=caller.id)
    if len(own) >= config.schedules_per_user:
        raise Problem("invalid-request", f"{caller.id} has {len(own)} schedules, the most a user may have "
                                         f"({config.schedules_per_user}); delete one first")


@router.post("/schedules", status_code=201, response_model=ScheduleView)
async def create(body: CreateSchedule, caller: Caller, service: Service, config: Config) -> ScheduleView:
    """A schedule whose runs start prompts as the caller (within the caller's quota and shortest interval)."""
    await _within_limits(body, caller, service, config)
    try:
        await create_schedule(service.agent, body.id, body.input, user_id=caller.id, cron=body.cron, every=body.every,
                              offset=body.offset, jitter=body.jitter, time_zone=body.time_zone,
                              overlap=body.overlap, model=body.model, paused=body.paused)
    except ScheduleError as exc:
        raise Problem("invalid-request", str(exc)) from None
    return await view_schedule(service.agent, body.id)


@router.get("/schedules", response_model=list[ScheduleView])
async def list_all(caller: Caller, service: Service) -> list[ScheduleView]:
    """The caller's schedules (an admin: everyone's). Only those are described."""
    return await list_schedules(service.agent, user_id=None if caller.is_admin else caller.id)


@router.get("/schedules/{schedule_id}", response_model=ScheduleView)
async def read(schedule_id: str, caller: Caller, service: Service) -> ScheduleView:
    return await _own(service, caller, schedule_id)


@router.post("/schedules/{schedule_id}/{action}", response_model=ScheduleView)
async def act(schedule_id: str, action: Literal["trigger", "pause", "unpause"], caller: Caller,
              service: Service) -> ScheduleView:
    """Start one run now, or stop / resume starting runs."""
    await _own(service, caller, schedule_id)
    handle = await schedule_handle(service.agent, schedule_id)
    if action == "trigger":
        await handle.trigger()
    elif action == "pause":
        await handle.pause(note=f"paused by {caller.id}")
    else:
        await handle.unpause(note=f"unpaused by {caller.id}")
    return await view_schedule(service.agent, schedule_id)


@router.delete("/schedules/{schedule_id}", status_code=204)
async def delete(schedule_id: str, caller: Caller, service: Service) -> Response:
    """Delete the schedule; the prompts it started stay."""
    await _own(service, caller, schedule_id)
    await (await schedule_handle(service.agent, schedule_id)).delete()
    return Response(status_code=204)
