"""Typed references to the activities workflows call.

Each binds once an activity's registered name (workflows/names.py, a wire contract recorded in histories), its
input type and its result type, so a call site names the activity and gets its result typed, instead of a name
and a `result_type=` of its own. tests/unit/test_activity_refs.py checks each against the activity definition
that registers the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from durable_agent.agent.period_budgets import BudgetRound, BudgetRoundResult, BudgetSettlement, BudgetStanding
from durable_agent.workflows import names
from durable_agent.workflows.protocol import (
    CorrectionCheck,
    CorrectionVerdict,
    EventDelivery,
    HistoryRef,
    RoundInput,
    RoundResult,
    StoreHistoryRequest,
    ToolInvocation,
    ToolInvocationResult,
    ToolThenModel,
    ToolThenModelResult,
)
from durable_agent.workflows.wire.notify import Notice, NoticeResult

InputT = TypeVar("InputT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class ActivityRef(Generic[InputT, ResultT]):
    """One activity as a workflow calls it: `name` as registered, `result_type` for the payload converter."""

    name: str
    input_type: type[InputT]
    result_type: Any  # type[ResultT], or a generic alias such as list[BudgetStanding]


MODEL_ROUND = ActivityRef[RoundInput, RoundResult](names.MODEL_ROUND_ACTIVITY, RoundInput, RoundResult)
INVOKE_TOOL = ActivityRef[ToolInvocation, ToolInvocationResult](
    names.INVOKE_TOOL_ACTIVITY, ToolInvocation, ToolInvocationResult)
TOOL_THEN_MODEL = ActivityRef[ToolThenModel, ToolThenModelResult](
    names.TOOL_THEN_MODEL_ACTIVITY, ToolThenModel, ToolThenModelResult)
EMIT_EVENT = ActivityRef[EventDelivery, None](names.EMIT_EVENT_ACTIVITY, EventDelivery, None)
CHECK_CORRECTION = ActivityRef[CorrectionCheck, CorrectionVerdict](
    names.CHECK_CORRECTION_ACTIVITY, CorrectionCheck, CorrectionVerdict)
STORE_HISTORY = ActivityRef[StoreHistoryRequest, HistoryRef](names.STORE_HISTORY_ACTIVITY, StoreHistoryRequest,
                                                             HistoryRef)
BUDGET_RESERVE = ActivityRef[BudgetRound, BudgetRoundResult](names.BUDGET_RESERVE_ACTIVITY, BudgetRound,
                                                             BudgetRoundResult)
BUDGET_SETTLE = ActivityRef[BudgetSettlement, list[BudgetStanding]](
    names.BUDGET_SETTLE_ACTIVITY, BudgetSettlement, list[BudgetStanding])
NOTIFY = ActivityRef[Notice, NoticeResult](names.NOTIFY_ACTIVITY, Notice, NoticeResult)

ACTIVITIES: tuple[ActivityRef[Any, Any], ...] = (MODEL_ROUND, INVOKE_TOOL, TOOL_THEN_MODEL, EMIT_EVENT,
                                                 CHECK_CORRECTION, STORE_HISTORY, BUDGET_RESERVE, BUDGET_SETTLE,
                                                 NOTIFY)
