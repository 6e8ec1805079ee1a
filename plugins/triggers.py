"""Triggers: `trigger.create` schedules a future system-initiated prompt in the same conversation.

Creating a trigger needs approval by default: it lets the assistant act later on the user's behalf.
Scheduling goes through the public API (`ToolContext.schedule_prompt` / `cancel_scheduled_prompt`); the
conversation holds a durable Temporal timer for each and never reads this plugin's state. The plugin's state
keeps its own list of what it asked for (`Trigger`), for `trigger.list`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, JsonValue, model_validator

from durable_agent.agent.context import ToolContext
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.strict import StrictModel
from durable_agent.agent.tools import Approval, tool

TRIGGERS_PLUGIN = "triggers"


class Trigger(StrictModel):
    """A trigger as the plugin's state lists it: `requested` or `cancelled` (the conversation's schedule tells
    which requested ones still wait and which fired)."""

    id: str
    message: str
    delay_seconds: float | None = Field(default=None, ge=0)
    at: datetime | None = None
    fire_at: datetime | None = None
    status: Literal["requested", "scheduled", "fired", "cancelled"] = "requested"
    prompt_id: str | None = Field(default=None, description="The prompt whose call requested it.")


def read_triggers(plugin_state: dict[str, JsonValue]) -> list[Trigger]:
    state = plugin_state.get(TRIGGERS_PLUGIN)
    items = state.get("triggers", []) if isinstance(state, dict) else []
    return [Trigger.model_validate(item) for item in items] if isinstance(items, list) else []


class CreateTrigger(BaseModel):
    message: str = Field(min_length=1, description="What to do or say when the trigger fires.")
    delay_seconds: float | None = Field(default=None, gt=0, description="Fire this many seconds from now.")
    at: datetime | None = Field(default=None, description="Fire at this time (ISO 8601, with time zone).")

    @model_validator(mode="after")
    def _one_time(self) -> CreateTrigger:
        if (self.delay_seconds is None) == (self.at is None):
            raise ValueError("give exactly one of delay_seconds or at")
        return self


class TriggerId(BaseModel):
    id: str


class NoInput(BaseModel):
    pass


def _require_conversation(ctx: ToolContext) -> None:
    if ctx.conversation_id is None:
        raise ValueError("triggers need a conversation: start this prompt through a ConversationWorkflow")


@tool("trigger.create", approval=Approval(reason="A trigger lets the assistant act later on your behalf."))
async def create_trigger(args: CreateTrigger, ctx: ToolContext) -> dict[str, object]:
    """Schedule a future prompt in this conversation, with `message` as its context."""
    _require_conversation(ctx)
    trigger_id = "trg-" + hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:10]
    ctx.schedule_prompt(args.message, delay_seconds=args.delay_seconds, at=args.at, id=trigger_id)
    triggers = [t for t in read_triggers({TRIGGERS_PLUGIN: ctx.state}) if t.id != trigger_id]
    triggers.append(Trigger(id=trigger_id, message=args.message, delay_seconds=args.delay_seconds, at=args.at,
                            prompt_id=ctx.prompt_id))
    _write(ctx, triggers)
    return {"id": trigger_id, "status": "requested"}


def _as_now(trigger: Trigger, ctx: ToolContext) -> Trigger:
    """`trigger` with its status as it stands: the plugin writes only `requested` and `cancelled`; the
    conversation's schedule says which requested ones wait (with their fire time) and which fired."""
    if trigger.status != "requested":
        return trigger
    waiting = next((s for s in ctx.conversation_schedule if s.id == trigger.id), None)
    if waiting is not None:
        return trigger.model_copy(update={"status": "scheduled", "fire_at": waiting.fire_at})
    if trigger.prompt_id == ctx.prompt_id:  # asked for by this prompt: scheduled when it ends
        return trigger
    return trigger.model_copy(update={"status": "fired"})


@tool("trigger.list")
async def list_triggers(args: NoInput, ctx: ToolContext) -> list[dict[str, object]]:
    """List this conversation's triggers: requested (scheduled when this prompt ends), scheduled (with when it
    fires), fired or cancelled."""
    return [_as_now(t, ctx).model_dump(mode="json", exclude={"prompt_id"})
            for t in read_triggers({TRIGGERS_PLUGIN: ctx.state})]


@tool("trigger.cancel")
async def cancel_trigger(args: TriggerId, ctx: ToolContext) -> str:
    """Cancel a trigger that has not fired yet."""
    triggers = read_triggers({TRIGGERS_PLUGIN: ctx.state})
    match = next((_as_now(t, ctx) for t in triggers if t.id == args.id), None)
    if match is None or match.status == "cancelled":
        raise ValueError(f"no pending trigger {args.id!r}")
    if match.status == "fired":
        raise ValueError(f"trigger {args.id!r} already fired; it cannot be cancelled")
    ctx.cancel_scheduled_prompt(args.id)
    _write(ctx, [t.model_copy(update={"status": "cancelled"}) if t.id == args.id else t for t in triggers])
    return f"cancelled {args.id}"


def _write(ctx: ToolContext, triggers: list[Trigger]) -> None:
    """The plugin's own list of what it asked for."""
    ctx.state["triggers"] = [t.model_dump(mode="json") for t in triggers]


plugin = Plugin(TRIGGERS_PLUGIN, tools=[create_trigger, list_triggers, cancel_trigger],
                instructions="You can schedule follow-ups with trigger.create (the user approves each).")
