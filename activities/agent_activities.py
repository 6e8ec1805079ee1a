"""The activities of a prompt: one model round, one tool call (alone, or with the next model round), one event
delivery. All I/O lives here.

Each family has its module: `model_round`, `tool_calls` (tool calls and corrections), `tool_then_model` (a round's
only call and the next model round), `history` (a conversation's stored history); the event hook is here. Activity
names come from workflows/names.py and never change.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from durable_agent.activities.budget_activities import BudgetActivities
from durable_agent.activities.heartbeats import bound_log
from durable_agent.activities.history import HistoryActivity
from durable_agent.activities.notify import NotifyActivity
from durable_agent.activities.tool_then_model import ToolThenModelActivity
from durable_agent.workflows.names import EMIT_EVENT_ACTIVITY
from durable_agent.workflows.protocol import EventDelivery


class AgentActivities(ToolThenModelActivity, HistoryActivity):
    """Register with `Worker(activities=AgentActivities(runtime).all())`."""

    def all(self) -> list[Any]:
        return [self.model_round, self.invoke_tool, self.tool_then_model, self.emit_event, self.store_history,
                self.check_correction, NotifyActivity(self.runtime.notify_config).notify,
                *BudgetActivities(self.runtime.decision_key).all()]

    @activity.defn(name=EMIT_EVENT_ACTIVITY)
    async def emit_event(self, delivery: EventDelivery) -> None:
        logger = bound_log(prompt_id=delivery.event.prompt_id, event=delivery.event.kind)
        for plugin in self.runtime.plugins:
            if not plugin.handles_events:
                continue
            try:
                await plugin.on_event(delivery.event)
            except Exception as exc:
                logger.error("plugin event hook failed", plugin=plugin.name, error=f"{type(exc).__name__}: {exc}")

