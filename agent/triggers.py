"""The `triggers` plugin's state schema, and the schedule of conversations started before version 4.

Conversations now schedule what `ToolContext.schedule_prompt` asks for (`Prompt.scheduled`) and never read a
plugin's state. Runs without `conversation-scheduled-prompts` still turn the *requested* triggers of this state
into durable timers, so the plugin keeps writing it (legacy: goes with that patch's drain, workflows/legacy.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field, JsonValue

from durable_agent.agent.strict import StrictModel

TRIGGERS_PLUGIN = "triggers"


class Trigger(StrictModel):
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


def write_triggers(plugin_state: dict[str, JsonValue], triggers: list[Trigger]) -> None:
    state = plugin_state.get(TRIGGERS_PLUGIN)
    merged = dict(state) if isinstance(state, dict) else {}
    merged["triggers"] = [t.model_dump(mode="json") for t in triggers]
    plugin_state[TRIGGERS_PLUGIN] = merged


def schedule_requested(triggers: list[Trigger], now: datetime) -> list[Trigger]:
    """Give every requested trigger its fire time (delays count from `now`)."""
    scheduled = []
    for trigger in triggers:
        if trigger.status == "requested":
            fire_at = trigger.at or now + timedelta(seconds=trigger.delay_seconds or 0)
            trigger = trigger.model_copy(update={"fire_at": fire_at, "status": "scheduled"})
        scheduled.append(trigger)
    return scheduled


def next_due(triggers: list[Trigger]) -> Trigger | None:
    pending = [t for t in triggers if t.status == "scheduled" and t.fire_at is not None]
    return min(pending, key=lambda t: t.fire_at) if pending else None  # type: ignore[arg-type,return-value]
