"""BudgetLedgerWorkflow: one per budget principal (`user:<id>`, `conversation:<id>`), for ever.

It holds the principal's `BudgetLimit` and the current UTC calendar period's spend. A prompt under its budget
reserves each model round (update `reserve_budget`, refused with a one-line reason once the period's budget is
spent) and settles it with the round's actual tokens and cost (update `settle_budget`); both come from the
prompt's activities with update-with-start, so the ledger exists on first use. `configure_budget` sets the
limit (client/budgets.py); query `budget_state` shows it. The period rolls over at its end (a durable timer,
`workflow.now()`), and the run continues as new before its history grows large, carrying the state.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from durable_agent.agent import metric_names
    from durable_agent.agent.period_budgets import (
        BudgetStanding,
        ConfigureRequest,
        Grant,
        LedgerState,
        LedgerView,
        PeriodSpend,
        ReserveRequest,
        ReserveResult,
        SettleRequest,
        period_end,
        period_start,
        principal_problem,
    )
    from durable_agent.workflows import names
    from durable_agent.workflows.inputs import decode_input, decoded, invalid_input, raw_payloads
    from durable_agent.workflows.telemetry import spelled

PAST_PERIODS_KEPT = 12
SETTLED_IDS_KEPT = 200  # a retried settle of one of these is not counted twice
STALE_RESERVATION = timedelta(days=1)  # a reservation never settled (its prompt was terminated) is dropped
RESERVE_WAIT = timedelta(seconds=20)  # a reserve waits this long for a free round, then answers busy
ROUND_SLOT = timedelta(minutes=10)  # an open reservation older than this no longer holds a concurrent round


ModelT = TypeVar("ModelT", bound="BaseModel")


@workflow.defn(name=names.BUDGET_LEDGER_WORKFLOW)
class BudgetLedgerWorkflow:
    @workflow.init
    @raw_payloads
    def __init__(self, *payloads: object) -> None:
        self._state, self._input_error = decode_input(payloads, LedgerState)
        if self._input_error is None:
            self._input_error = principal_problem(self._state.principal)
        self._updates = 0
        self._memo: object = None

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> LedgerView:
        if self._input_error:
            raise invalid_input(self._input_error)
        self._roll()
        self._publish()
        while True:
            end = self._period_end()
            wait = max(end - workflow.now(), timedelta(0)) if end else None
            try:  # a new limit (another period) wakes it to wait for the new period end instead
                await workflow.wait_condition(lambda end=end: self._should_continue_as_new()  # type: ignore[misc]
                                              or self._period_end() != end,
                                              timeout=wait, timeout_summary="budget period end")
            except TimeoutError:
                self._roll()
                self._publish()
                continue
            if not self._should_continue_as_new():
                continue
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(self._state.model_copy(update={"runs": self._state.runs + 1}))

    # --- handlers -----------------------------------------------------------------------------------

    @workflow.update(name=names.CONFIGURE_BUDGET_UPDATE,
                     description='Set the budget. Payload: {"principal": "user:alice", "limit": {"period": "day", '
                                 '"max_tokens": 100000}} (limit null: no budget).')
    @raw_payloads
    def configure_budget(self, *payloads: object) -> LedgerView:
        self._configure(self._updating(payloads, ConfigureRequest))
        return self._changed()

    @configure_budget.validator
    @raw_payloads
    def _validate_configure(self, *payloads: object) -> None:
        request = decoded(payloads, ConfigureRequest)
        if request.principal != self._state.principal:
            raise invalid_input(f"this ledger is {self._state.principal}'s, not {request.principal}'s")

    @workflow.update(name=names.RESERVE_BUDGET_UPDATE,
                     description="A model round asks to go ahead; refused (with why) once the period's budget is "
                                 'spent. Payload: {"reservation_id": "…", "grant": {"id", "unit", "amount"}?}')
    @raw_payloads
    async def reserve_budget(self, *payloads: object) -> ReserveResult:
        request = self._updating(payloads, ReserveRequest)
        if request.grant is not None:
            self._grant(request.grant)
        if not self._has_round(request.reservation_id):  # the budget's concurrent rounds all run: wait for one
            try:
                await workflow.wait_condition(lambda: self._has_round(request.reservation_id), timeout=RESERVE_WAIT,
                                              timeout_summary="a free round of this budget")
            except TimeoutError:
                return ReserveResult(busy=True, standing=self._standing())
            self._roll()
        refused = self._standing().refusal()
        if refused is None:
            self._state.reservations.setdefault(request.reservation_id, workflow.now())
            if request.reservation_id in self._state.settled:  # reserved again after a zero settle: its real
                self._state.settled.remove(request.reservation_id)  # settle must count
        self._changed()
        return ReserveResult(refused=refused, standing=self._standing())

    @reserve_budget.validator
    @raw_payloads
    def _validate_reserve(self, *payloads: object) -> None:
        decoded(payloads, ReserveRequest)

    @workflow.update(name=names.SETTLE_BUDGET_UPDATE, description=(
        'A reserved round\'s actual spend. Payload: {"reservation_id": "…", "tokens": 0, "cost": 0.0}'))
    @raw_payloads
    def settle_budget(self, *payloads: object) -> BudgetStanding:
        self._settle(self._updating(payloads, SettleRequest))
        return self._changed().standing

    @settle_budget.validator
    @raw_payloads
    def _validate_settle(self, *payloads: object) -> None:
        decoded(payloads, SettleRequest)

    @workflow.query(name=names.BUDGET_STATE_QUERY, description="The budget, this period's spend, past periods.")
    @raw_payloads
    def budget_state(self, *payloads: object) -> LedgerView:
        return self._view()

    # --- state ----------------------------------------------------------------------------------------

    def _updating(self, payloads: tuple[object, ...], model: type[ModelT]) -> ModelT:
        """An update's request, decoded, with the ledger in the period `workflow.now()` is in."""
        request = decoded(payloads, model)
        self._roll()
        return request

    def _configure(self, request: ConfigureRequest) -> None:
        """The new limit; a new kind of period starts now (the same kind keeps this period's spend)."""
        state = self._state
        before = state.limit.period if state.limit else None
        state.limit, state.configured_by = request.limit, request.by
        if request.limit is not None and (state.period_start is None or before != request.limit.period):
            state.period_start = period_start(workflow.now(), request.limit.period)

    def _settle(self, request: SettleRequest) -> None:
        """A reserved round's spend counts, once (a retried settle does not count again)."""
        state = self._state
        if request.reservation_id in state.settled:
            return
        state.reservations.pop(request.reservation_id, None)
        state.settled = [*state.settled, request.reservation_id][-SETTLED_IDS_KEPT:]
        state.spent_tokens += request.tokens
        state.spent_cost += request.cost

    def _has_round(self, reservation_id: str) -> bool:
        """Whether a round may reserve now: fewer than the limit's `concurrent_rounds` are open (a retry of an
        open one always may); this bounds how far concurrent prompts can pass the limit."""
        state = self._state
        if state.limit is None or reservation_id in state.reservations:
            return True
        now = workflow.now()
        running = sum(1 for at in state.reservations.values() if now - at < ROUND_SLOT)
        return running < state.limit.concurrent_rounds

    def _grant(self, grant: Grant) -> None:
        """An approved request for more budget raises this period's limit, once per grant."""
        state = self._state
        if grant.id in state.grants:
            return
        state.grants.append(grant.id)
        if grant.unit == "tokens":
            state.extra_tokens += int(grant.amount)
        else:
            state.extra_cost += grant.amount

    def _period_end(self) -> datetime | None:
        state = self._state
        if state.limit is None or state.period_start is None:
            return None
        return period_end(state.period_start, state.limit.period)

    def _roll(self) -> None:
        """Start the period `workflow.now()` is in, if it is not the current one (the spent one is kept)."""
        state = self._state
        if state.limit is None:
            return
        start = period_start(workflow.now(), state.limit.period)
        if state.period_start == start:
            return
        if state.period_start is not None:
            state.past = [*state.past, PeriodSpend(period_start=state.period_start, **state.totals())][
                -PAST_PERIODS_KEPT:]
        state.period_start = start
        state.spent_tokens, state.spent_cost, state.extra_tokens, state.extra_cost = 0, 0.0, 0, 0.0
        state.grants = []
        now = workflow.now()
        state.reservations = {r: at for r, at in state.reservations.items() if now - at < STALE_RESERVATION}

    def _standing(self) -> BudgetStanding:
        state = self._state
        return BudgetStanding(
            principal=state.principal, limit=state.limit, period_start=state.period_start,
            period_end=self._period_end(), reservations=len(state.reservations),
            **(state.totals() | {"spent_cost": round(state.spent_cost, 10)}))

    def _view(self) -> LedgerView:
        state = self._state
        return LedgerView(standing=self._standing(), past=list(state.past), configured_by=state.configured_by,
                          runs=state.runs)

    def _changed(self) -> LedgerView:
        self._updates += 1
        self._publish()
        return self._view()

    def _publish(self) -> None:
        """The limit in the memo (listings) and, when the budget asks for it (`metrics`: the principal becomes a
        label), the spend as metrics (replay-safe meter)."""
        standing = self._standing()
        memo = standing.limit.model_dump(mode="json") if standing.limit else None
        if memo != self._memo:
            self._memo = memo
            workflow.upsert_memo({names.BUDGET_MEMO: memo})
        limit = standing.limit
        if limit is None or not limit.metrics:
            return
        meter = workflow.metric_meter()
        attributes = metric_names.attributes({"dagent.budget.principal": standing.principal})
        meter.create_gauge(*spelled(metric_names.BUDGET_SPENT_TOKENS)).set(standing.spent_tokens, attributes)
        meter.create_gauge_float(*spelled(metric_names.BUDGET_SPENT_COST)).set(standing.spent_cost, attributes)
        if limit.max_tokens is not None:
            meter.create_gauge(*spelled(metric_names.BUDGET_LIMIT_TOKENS)).set(
                limit.max_tokens + standing.extra_tokens, attributes)
        if limit.max_cost is not None:
            meter.create_gauge_float(*spelled(metric_names.BUDGET_LIMIT_COST)).set(
                limit.max_cost + standing.extra_cost, attributes)

    def _should_continue_as_new(self) -> bool:
        return self._updates >= self._state.updates_per_run or workflow.info().is_continue_as_new_suggested()


__all__ = ["BudgetLedgerWorkflow"]
