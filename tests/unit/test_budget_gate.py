"""BudgetGate (workflows/budget/gate.py) on a plain host: each round reserved from the ledgers and settled with its
spend; a spent budget stops the prompt, or, under an `ask` budget, waits at the desk for an approver to grant more;
a busy ledger is asked again after a pause; an unreachable one stops the prompt; a spend not recorded is audited."""

from __future__ import annotations

import asyncio

from durable_agent.agent.models import Prompt, ToolError, ToolOutput, ToolSuccess, Usage
from durable_agent.agent.period_budgets import (
    MORE_BUDGET_TOOL,
    BudgetLimit,
    BudgetRefusal,
    BudgetRound,
    BudgetRoundResult,
    BudgetSettlement,
    BudgetStanding,
)
from durable_agent.workflows.activity_refs import BUDGET_RESERVE, BUDGET_SETTLE
from durable_agent.workflows.budget.gate import BUSY_PAUSE, BudgetGate
from durable_agent.workflows.prompt.approvals import ApprovalDesk
from durable_agent.workflows.protocol import ApproveRequest, PromptRequest, RejectRequest, RoundResult
from tests.unit.conftest import PlainHost, activity_failure, context_of, fails

ANN = "user:ann"
ASK = BudgetLimit(max_tokens=1000, on_exhausted="ask", approvers=["user:boss", "user:owner"])


def _gate(host: PlainHost, *principals: str) -> tuple[BudgetGate, ApprovalDesk, Prompt]:
    """The gate, its desk and the prompt they record in."""
    context = context_of(host, PromptRequest(budgets=list(principals)))
    desk = ApprovalDesk(context, steered=lambda: False)
    return BudgetGate(context, desk), desk, context.prompt


def _standing(spent: int, limit: BudgetLimit | None = None) -> BudgetStanding:
    return BudgetStanding(principal=ANN, spent_tokens=spent, limit=limit)


def _refusal(limit: BudgetLimit) -> BudgetRefusal:
    return BudgetRefusal(principal=ANN, reason="user:ann spent its 1000 tokens this day", unit="tokens",
                         allowance=1000, spent=1200, limit=limit)


def _ledger(host: PlainHost, *verdicts: BudgetRoundResult) -> list[BudgetRound]:
    """The ledger answers each reserve with the next verdict; returns the reserves it got."""
    asked: list[BudgetRound] = []
    answers = iter(verdicts)

    def reserve(request: BudgetRound) -> BudgetRoundResult:
        asked.append(request)
        return next(answers)

    host.answers[BUDGET_RESERVE.name] = reserve
    return asked


def test_a_prompt_naming_no_budget_never_reaches_the_ledgers(host: PlainHost) -> None:
    gate, *_ = _gate(host)
    assert not gate.active


async def test_a_round_is_reserved_then_settled_with_its_spend_and_the_standing_recorded(host: PlainHost) -> None:
    gate, _, prompt = _gate(host, ANN)
    asked = _ledger(host, BudgetRoundResult(standings=[_standing(100)]))
    assert await gate.reserve(1) and gate.stop_reason is None
    assert asked[0].reservation_id == "wf-1/run-1/1" and asked[0].principals == [ANN]
    settled: list[BudgetSettlement] = []
    host.answers[BUDGET_SETTLE.name] = lambda s: settled.append(s) or [_standing(130)]
    prompt.rounds = 1
    await gate.settle(RoundResult(usage=Usage(input_tokens=20, output_tokens=10, cost=0.5)))
    assert [(s.reservation_id, s.tokens, s.cost) for s in settled] == [("wf-1/run-1/1", 30, 0.5)]
    assert prompt.budgets == [_standing(130)]
    await gate.settle(RoundResult())  # settled once: no reservation left
    assert len(settled) == 1


async def test_a_spent_budget_stops_the_prompt(host: PlainHost) -> None:
    gate, desk, _ = _gate(host, ANN)
    _ledger(host, BudgetRoundResult(refusal=_refusal(BudgetLimit(max_tokens=1000)), standings=[_standing(1200)]))
    assert not await gate.reserve(2)
    assert gate.stop_reason == "user:ann spent its 1000 tokens this day" and not desk.waiting


async def test_a_busy_ledger_is_asked_again_after_a_pause(host: PlainHost) -> None:
    gate, *_ = _gate(host, ANN)
    asked = _ledger(host, BudgetRoundResult(busy=True), BudgetRoundResult(standings=[_standing(0)]))
    start = host.clock
    assert await gate.reserve(1)
    assert len(asked) == 2 and host.timers == ["budget busy"] and host.clock - start == BUSY_PAUSE


async def test_an_unreachable_ledger_stops_the_prompt_and_a_lost_settlement_is_audited(host: PlainHost) -> None:
    gate, _, prompt = _gate(host, ANN)
    host.answers[BUDGET_RESERVE.name] = fails(activity_failure("ledger down"))
    assert not await gate.reserve(1)
    assert gate.stop_reason == "the budget ledger could not be reached: ledger down"
    _ledger(host, BudgetRoundResult())
    assert await gate.reserve(1)
    host.answers[BUDGET_SETTLE.name] = fails(activity_failure("ledger down"))
    await gate.settle(RoundResult(usage=Usage(input_tokens=5)))
    [audit] = prompt.audit
    assert audit.kind == "ignored_budget_settle" and "spend not recorded" in audit.detail


async def test_an_ask_budget_waits_for_a_grant_and_the_next_reserve_carries_it(host: PlainHost) -> None:
    gate, desk, prompt = _gate(host, ANN)
    asked = _ledger(host, BudgetRoundResult(refusal=_refusal(ASK), standings=[_standing(1200, ASK)]),
                    BudgetRoundResult(standings=[_standing(1200, ASK)]))
    reserving = asyncio.ensure_future(gate.reserve(3))
    await asyncio.sleep(0)
    [call_id] = desk.waiting
    entry = prompt.output[-1]
    assert isinstance(entry, ToolOutput) and (entry.id, entry.tool) == (call_id, MORE_BUDGET_TOOL)
    own = desk.checks.problem("approve", ApproveRequest(tool_call_id=call_id, by="user:owner"))
    assert own is not None and "four-eyes" in own.message  # never the prompt's own user
    assert desk.approve_signal(ApproveRequest(tool_call_id=call_id, by="user:boss", input={"asking": 500})) is None
    assert await reserving and gate.stop_reason is None
    grant = asked[1].grant
    assert grant is not None and (grant.unit, grant.amount, asked[1].grant_principal) == ("tokens", 500, ANN)
    assert entry.result == ToolSuccess(output="granted 500 more tokens to user:ann this day")


async def test_an_ask_the_approver_refuses_stops_the_prompt(host: PlainHost) -> None:
    gate, desk, prompt = _gate(host, ANN)
    _ledger(host, BudgetRoundResult(refusal=_refusal(ASK)))
    reserving = asyncio.ensure_future(gate.reserve(3))
    await asyncio.sleep(0)
    [call_id] = desk.waiting
    refusal = RejectRequest(tool_call_id=call_id, by="user:boss", reason="not this month")
    assert desk.reject_signal(refusal) is None
    assert not await reserving and gate.stop_reason == "user:ann spent its 1000 tokens this day"
    assert prompt.output[-1].result == ToolError(error="The call was rejected by boss: not this month")  # type: ignore[union-attr]
