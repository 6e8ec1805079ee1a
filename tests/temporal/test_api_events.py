"""Live events over SSE and AG-UI, against a real dev server, worker and uvicorn app."""

from __future__ import annotations

import json

from temporalio.testing import WorkflowEnvironment

from tests.support.api import ApiStack, api_stack
from tests.support.sse import SSE, read_sse


async def _read_all(stack: ApiStack, prompt_id: str, last_event_id: str | None = None) -> list[SSE]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    events: list[SSE] = []
    async with stack.http("alice") as http, http.stream("GET", f"/prompts/{prompt_id}/events",
                                                          headers=headers) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        async for event in read_sse(response):
            if not event.comment:
                events.append(event)
    return events


async def test_reconnect_with_last_event_id_has_no_gap_and_no_duplicate(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env, stream_text=True, heartbeat_seconds=0.2) as stack:
        async with stack.http("alice") as http:
            prompt_id = (await http.post("/prompts", json={"input": "pay bob 250"})).json()["id"]
        first: list[SSE] = []
        heartbeats = 0
        async with stack.http("alice") as http, http.stream("GET", f"/prompts/{prompt_id}/events") as response:
            async for event in read_sse(response):
                if event.comment:
                    heartbeats += 1
                    if any(e.event == "approval_requested" for e in first) and heartbeats >= 2:
                        break  # waiting for approval and idle: the heartbeats keep the stream alive
                    continue
                first.append(event)
        # Disconnected mid-prompt. Decide while nobody listens, then resume where the client left off.
        assert first[-1].event != "end"
        call_id = next(json.loads(e.data)["output"]["id"] for e in first if e.event == "approval_requested")
        async with stack.http("alice") as http:
            decided = await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")
            assert decided.status_code == 200, decided.text
        rest = await _read_all(stack, prompt_id, last_event_id=first[-1].id)
        assert rest[-1].event == "end" and json.loads(rest[-1].data)["state"] == "completed"
        whole = await _read_all(stack, prompt_id)
        durable = [e for e in first + rest[:-1] if e.event != "text_delta"]
        assert [(e.id, e.event, e.data) for e in durable] == [(e.id, e.event, e.data) for e in whole[:-1]]
        ids = [int(e.id) for e in whole[:-1] if e.id is not None]
        assert ids == sorted(set(ids)) and ids[0] == 0 and len(ids) == len(whole) - 1, ids
        kinds = {e.event for e in whole}
        assert {"state_changed", "output_added", "output_updated", "approval_requested"} <= kinds
        # Streamed text is live only (heartbeat details, never in history): a delta carries no SSE id, is
        # never replayed to a late reader, and is a piece of the round's text.
        assert "text_delta" not in kinds
        for delta in (e for e in first if e.event == "text_delta"):
            assert delta.id is None
            piece = json.loads(delta.data)
            assert "Paying now."[piece["offset"]:piece["offset"] + len(piece["text"])] == piece["text"]


def _agui_events(body: str) -> list[dict[str, object]]:
    """AG-UI's SSE encoding: one `data:` line per event, validated against the protocol's own types."""
    from ag_ui.core import Event
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Event] = TypeAdapter(Event)
    events = []
    for line in body.splitlines():
        if line.startswith("data: "):
            raw = json.loads(line[len("data: "):])
            adapter.validate_python(raw)
            events.append(raw)
    return events


async def test_agui_run_with_tool_calls_and_an_approval_interrupt(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack, stack.http("alice") as http:
        first = await http.post("/agui", json={
            "threadId": "thread-agui-1", "runId": "run-1",
            "messages": [{"id": "m1", "role": "user", "content": "pay bob 250"}]})
        assert first.status_code == 200, first.text
        prompt_id = first.headers["x-prompt-id"]
        events = _agui_events(first.text)
        types = [e["type"] for e in events]
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
        assert types.index("TOOL_CALL_START") < types.index("TOOL_CALL_ARGS") < types.index("TOOL_CALL_END")
        start = next(e for e in events if e["type"] == "TOOL_CALL_START")
        assert start["toolCallName"] == "payment.send"
        args = next(e for e in events if e["type"] == "TOOL_CALL_ARGS")
        assert json.loads(str(args["delta"])) == {"to": "bob", "amount": 250}
        outcome = events[-1]["outcome"]
        assert isinstance(outcome, dict) and outcome["type"] == "interrupt"
        interrupt = outcome["interrupts"][0]
        assert interrupt["reason"] == "tool_approval" and interrupt["toolCallId"] == start["toolCallId"]
        assert interrupt["message"] == "Sending $250 requires approval."

        resumed = await http.post("/agui", json={
            "threadId": "thread-agui-1", "runId": "run-2", "messages": [],
            "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                        "payload": {"approved": True, "input": {"to": "bob", "amount": 99}}}],
            "forwardedProps": {"prompt_id": prompt_id}})
        assert resumed.status_code == 200, resumed.text
        events = _agui_events(resumed.text)
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == start["toolCallId"]
        assert json.loads(str(result["content"])) == {"sent": 99.0, "to": "bob"}
        text = "".join(str(e["delta"]) for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text.startswith("Done: payment.send ok")
        assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
        prompt = await stack.agent.prompt(prompt_id).get()
        assert prompt.user_id == "alice" and prompt.conversation_id == "thread-agui-1"
        assert prompt.tool_call(start["toolCallId"]).decision.by == "alice"  # type: ignore[union-attr]
