"""Which rounds run their call with the next model round (workflows/prompt/tool_then_model.py `fusable`), and the round
input the activity builds once the tool has run (activities/tool_then_model.py `round_after_tool`)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from durable_agent.activities.tool_then_model import round_after_tool
from durable_agent.agent.models import (
    ApprovalRequest,
    FileOutput,
    Prompt,
    ScheduledPrompt,
    TextOutput,
    ToolOutput,
    ToolSuccess,
    Usage,
)
from durable_agent.workflows.budget.limits import PromptBudget
from durable_agent.workflows.prompt.tool_then_model import fusable
from durable_agent.workflows.protocol import (
    CallNeedingApproval,
    InvalidCall,
    ModelRouting,
    OutputChange,
    PlannedCall,
    PromptRequest,
    ReadyCall,
    RoundInput,
    SubAgentCall,
    ToolInvocation,
    ToolInvocationResult,
    ToolThenModel,
)

NOW = datetime(2026, 11, 27, tzinfo=UTC)
READY = ReadyCall(id="c1", tool="step.run", plugin="steps", input={"n": 1})


def test_the_one_ready_regular_call_of_a_round_that_a_next_round_follows_goes_with_it() -> None:
    request = PromptRequest(input="go")
    assert fusable([READY], 1, request, Usage(), period_budgets=False) is READY


calls = st.lists(st.sampled_from([
    READY, READY.model_copy(update={"options": READY.options.model_copy(update={"local": True})}),
    ReadyCall(id="c2", tool="helper", agent=SubAgentCall(instructions="help")),
    CallNeedingApproval(id="c3", tool="pay", approval=ApprovalRequest(reason="money")),
    InvalidCall(id="c4", tool="nope", error="unknown tool"),
]), min_size=0, max_size=3)


@given(calls=calls, round_number=st.integers(1, 5), max_rounds=st.integers(1, 5), period_budgets=st.booleans(),
       model_local=st.booleans(), queue=st.sampled_from([None, "models"]), routed=st.booleans(),
       budget_spent=st.booleans())
def test_a_call_goes_with_the_next_round_only_when_nothing_is_decided_between_them(
        calls: list[PlannedCall], round_number: int, max_rounds: int, period_budgets: bool, model_local: bool,
        queue: str | None, routed: bool, budget_spent: bool) -> None:
    request = PromptRequest(input="go", max_rounds=max_rounds, model_local=model_local, model_task_queue=queue,
                            model_routing=ModelRouting(providers={"scripted": "q"}) if routed else None,
                            budget=PromptBudget(max_tokens=10))
    usage = Usage(input_tokens=10 if budget_spent else 1)
    chosen = fusable(calls, round_number, request, usage, period_budgets=period_budgets)
    expected = (len(calls) == 1 and calls[0] is READY and round_number < max_rounds and not period_budgets
                and not model_local and queue is None and not routed and not budget_spent)
    assert chosen is (READY if expected else None)


def _fused(changes: list[OutputChange] | None, *, count: int, plugin: str | None = "steps") -> ToolThenModel:
    prompt = Prompt(id="p", user_id="u", input="go", plugin_state={"steps": {"last": 0}, "other": 1})
    return ToolThenModel(call=ToolInvocation(prompt_id="p", user_id="u", id="c1", tool="step.run", plugin=plugin,
                                                     input={"n": 1}),
                         tool_timeout_seconds=5, entry_index=1,
                         round=RoundInput(prompt=prompt, round=2, changes=changes, output_count=count))


OPEN = ToolOutput(id="c1", tool="step.run", input={"n": 1}, started_at=NOW)


def test_the_next_round_reads_the_result_the_side_outputs_and_the_new_state() -> None:
    fused = _fused([OutputChange(index=0, output=TextOutput(text="let me")), OutputChange(index=1, output=OPEN)],
                   count=2)
    file = FileOutput(name="a.txt", media_type="text/plain", size=1, content_ref="ref", summary="a")
    outcome = ToolInvocationResult(result=ToolSuccess(output={"step": 1}), state_changed=True,
                                   plugin_state={"last": 1},
                                   side_outputs=[ScheduledPrompt(id="s1", message="later", at=NOW), file])
    after = round_after_tool(fused, outcome)
    assert after is not None
    assert [(c.index, c.output.type) for c in after.changes or []] == [(0, "text"), (1, "tool"), (2, "file")]
    entry = (after.changes or [])[1].output
    assert isinstance(entry, ToolOutput) and entry.result == ToolSuccess(output={"step": 1})
    assert entry.finished_at is not None and entry.started_at == NOW
    assert after.output_count == 3  # a scheduled prompt is not an entry of the record
    assert after.prompt.plugin_state == {"steps": {"last": 1}, "other": 1}
    assert fused.round.prompt.plugin_state == {"steps": {"last": 0}, "other": 1}  # the input is not changed


def test_an_unchanged_state_and_a_call_without_a_plugin_keep_the_state() -> None:
    outcome = ToolInvocationResult(result=ToolSuccess(output=1), state_changed=True, plugin_state={"x": 1})
    fused = _fused([OutputChange(index=1, output=OPEN)], count=2, plugin=None)
    after = round_after_tool(fused, outcome)
    assert after is not None and after.prompt.plugin_state == fused.round.prompt.plugin_state
    unchanged = ToolInvocationResult(result=ToolSuccess(output=1))
    after = round_after_tool(_fused([OutputChange(index=1, output=OPEN)], count=2), unchanged)
    assert after is not None and after.prompt.plugin_state == {"steps": {"last": 0}, "other": 1}


def test_without_the_open_entry_in_the_changes_there_is_no_round_to_build() -> None:
    outcome = ToolInvocationResult(result=ToolSuccess(output=1))
    assert round_after_tool(_fused(None, count=2), outcome) is None
    assert round_after_tool(_fused([OutputChange(index=0, output=TextOutput(text="x"))], count=2), outcome) is None
    other = OPEN.model_copy(update={"id": "c9"})
    assert round_after_tool(_fused([OutputChange(index=1, output=other)], count=2), outcome) is None
