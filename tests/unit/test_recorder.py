"""The Recorder (workflows/prompt/record.py): entries in place, an id -> index map, the stream, spans, the memo."""

from __future__ import annotations

from datetime import timedelta

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import ApprovalRequest, Prompt, TextOutput, ToolError, ToolSuccess
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.protocol import PendingApproval, ReadyCall
from tests.unit.conftest import PlainHost


def _recorder(host: PlainHost) -> Recorder:
    return Recorder(Prompt(id="p1", user_id="alice"), host)


def test_calls_get_unique_ids_and_are_found_by_id_without_a_scan(host: PlainHost) -> None:
    record = _recorder(host)
    record.append(TextOutput(text="thinking"))
    first = record.open_call(ReadyCall(id="c", tool="t"))
    second = record.open_call(ReadyCall(id="c", tool="t"))
    third = record.open_call(ReadyCall(id="c", tool="t"))
    assert [first.id, second.id, third.id] == ["c", "c-2", "c-3"]
    assert record.tool_call("c-2") is second
    assert record.index(third) == 3
    assert record.position("c-3") == 3
    assert record.position("nope") == 4 and record.tool_call("nope") is None
    assert record.changed == {0, 1, 2, 3}
    assert [(e.kind, e.index) for e in host.events] == [(EventKind.OUTPUT_ADDED, i) for i in range(4)]


def test_resolve_updates_the_entry_in_place_and_publishes_its_index(host: PlainHost) -> None:
    record = _recorder(host)
    record.append(TextOutput(text="a"))
    entry = record.open_call(ReadyCall(id="c", tool="t"))
    record.changed.clear()
    host.clock += timedelta(seconds=5)
    record.resolve(entry, ToolSuccess(output=42))
    assert record.prompt.output[1] is entry and entry.result == ToolSuccess(output=42)
    assert entry.finished_at == host.clock
    assert record.changed == {1}
    assert (host.events[-1].kind, host.events[-1].index) == (EventKind.OUTPUT_UPDATED, 1)


def test_interrupt_ends_unfinished_and_waiting_calls_only(host: PlainHost) -> None:
    record = _recorder(host)
    done = record.open_call(ReadyCall(id="done", tool="t"))
    record.end_call(done, "boom", "error")
    running = record.open_call(ReadyCall(id="running", tool="t"))
    waiting = record.open_call(ReadyCall(id="waiting", tool="t"))
    waiting.result = ApprovalRequest(reason="why", requested_at=host.clock)
    record.interrupt("stopped while running", waiting="stopped while waiting")
    assert done.result == ToolError(error="boom")
    assert running.result == ToolError(error="stopped while running")
    assert waiting.result == ToolError(error="stopped while waiting")
    assert host.metrics.calls == [("tool_call", ("t", "error")), ("tool_call", ("t", "interrupted")),
                                  ("tool_call", ("t", "interrupted"))]


def test_state_goes_to_the_search_attributes_and_the_stream(host: PlainHost) -> None:
    record = _recorder(host)
    record.set_state("running")
    assert host.states == ["running"]
    assert (host.events[-1].kind, host.events[-1].state) == (EventKind.STATE_CHANGED, "running")


def test_the_memo_is_written_only_when_the_waiting_calls_change(host: PlainHost) -> None:
    record = _recorder(host)
    row = PendingApproval(prompt_id="p", user_id="u", tool_call_id="c", tool="t", input={}, reason="why",
                          requested_at=host.clock)
    record.publish_pending(False, lambda: [])
    assert host.memos == []  # nothing said, nothing waits: no event
    record.publish_pending(True, lambda: [row])
    record.publish_pending(True, lambda: [row])
    assert len(host.memos) == 1 and host.memos[0]
    record.publish_pending(False, lambda: [])
    assert len(host.memos) == 2 and host.memos[1] != host.memos[0]  # the memo says nothing waits now
