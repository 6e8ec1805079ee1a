"""The user's steering messages (workflows/prompt/steering.py): refused once the prompt ended, held until delivered,
and the planned calls they outdate recorded as skipped, never run."""

from __future__ import annotations

from durable_agent.agent.models import MessageOutput, ToolError
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.prompt.steering import Steering
from durable_agent.workflows.prompt.tool_runner import SKIPPED_BY_STEER
from durable_agent.workflows.protocol import ReadyCall, SteerRequest
from tests.unit.conftest import PlainHost, context_of


def _steering() -> tuple[Steering, Recorder]:
    context = context_of(PlainHost())
    context.record.set_state("running")
    return Steering(context), context.record


def test_a_message_waits_for_the_next_round_then_enters_the_record() -> None:
    steering, record = _steering()
    assert not steering.arrived()
    assert steering.accept(SteerRequest(message="stop")) is None
    assert steering.accept(SteerRequest(message="and summarise")) is None
    assert steering.arrived() and record.prompt.output == []  # held, not yet in the record
    steering.deliver()
    assert not steering.arrived()
    assert record.prompt.output == [MessageOutput(role="user", source="steer", text="stop"),
                                    MessageOutput(role="user", source="steer", text="and summarise")]


def test_outdated_calls_are_recorded_as_skipped() -> None:
    steering, record = _steering()
    steering.skip([ReadyCall(id="c1", tool="pay", input={"amount": 5}), ReadyCall(id="c2", tool="mail")])
    entries = [record.tool_call("c1"), record.tool_call("c2")]
    assert all(entry is not None and entry.finished_at is not None for entry in entries)
    assert [entry.result for entry in entries if entry is not None] == [ToolError(error=SKIPPED_BY_STEER)] * 2


def test_an_ended_prompt_refuses_messages() -> None:
    steering, record = _steering()
    record.set_state("completed")
    assert steering.accept(SteerRequest(message="late")) == "prompt p1 is already completed"
    assert not steering.arrived()
