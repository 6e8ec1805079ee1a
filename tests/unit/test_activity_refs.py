"""The typed activity references workflows call (workflows/activity_refs.py) match the activities the worker
registers: the same name (a wire contract, recorded in histories), input and result types, one reference each."""

from __future__ import annotations

import typing
from collections.abc import Callable

import pytest

from durable_agent.activities.agent_activities import AgentActivities
from durable_agent.activities.budget_activities import BudgetActivities
from durable_agent.activities.history import HistoryActivity
from durable_agent.activities.model_round import ModelRoundActivity
from durable_agent.activities.notify import NotifyActivity
from durable_agent.activities.tool_calls import ToolActivities
from durable_agent.activities.tool_then_model import ToolThenModelActivity
from durable_agent.workflows import activity_refs, names
from durable_agent.workflows.sdk_private import activity_name

DEFINITIONS: list[Callable[..., object]] = [
    ModelRoundActivity.model_round, ToolActivities.invoke_tool, ToolThenModelActivity.tool_then_model,
    AgentActivities.emit_event, ToolActivities.check_correction, HistoryActivity.store_history,
    BudgetActivities.reserve, BudgetActivities.settle, NotifyActivity.notify]


def test_every_activity_has_one_reference_under_its_registered_name() -> None:
    registered = sorted(activity_name(definition) for definition in DEFINITIONS)
    assert registered == sorted(ref.name for ref in activity_refs.ACTIVITIES)
    assert set(registered) == {value for key, value in vars(names).items() if key.endswith("_ACTIVITY")}
    assert len(registered) == len(set(registered)) == 9


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda definition: definition.__name__)
def test_a_reference_has_its_activitys_input_and_result_types(definition: Callable[..., object]) -> None:
    [ref] = [ref for ref in activity_refs.ACTIVITIES if ref.name == activity_name(definition)]
    hints = typing.get_type_hints(definition)
    result = hints.pop("return")
    assert list(hints.values()) == [ref.input_type]
    assert result == (type(None) if ref.result_type is None else ref.result_type)
