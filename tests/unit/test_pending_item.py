"""The HTTP API's waiting-call row (api/schemas.py PendingApprovalItem) is the prompt's own `PendingApproval`
plus the listing's fields, with the JSON field names the inbox and clients read, exactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from durable_agent.api.schemas import Links, PendingApprovalItem
from durable_agent.workflows.protocol import PendingApproval

JSON_FIELDS = {"prompt_id", "user_id", "conversation_id", "tool_call_id", "tool", "input", "reason", "requested_at",
               "expires_at", "approvers", "input_schema", "path", "four_eyes", "can_decide", "context", "links"}


def _call(**fields: object) -> PendingApproval:
    return PendingApproval(prompt_id="p1", user_id="ann", tool_call_id="c1", tool="pay", input={"amount": 5},
                           reason="money", requested_at=datetime(2026, 1, 1, tzinfo=UTC), **fields)  # type: ignore[arg-type]


def test_the_row_carries_every_field_of_the_call_and_keeps_its_json_names() -> None:
    call = _call(approvers=["role:finance"], path=["child-1"], input_schema={"type": "object"},
                 decision_key="PEM", run_id="run-1", expires_after=timedelta(hours=1), plugin="payments")
    item = PendingApprovalItem.of(call, can_decide=True, links=Links(self="/prompts/p1"))
    body = json.loads(item.model_dump_json())
    assert set(body) == JSON_FIELDS  # the fields only the workflow reads (decision key, run, ...) stay off it
    assert {name: body[name] for name in ("tool_call_id", "tool", "input", "reason", "approvers", "path")} == {
        "tool_call_id": "c1", "tool": "pay", "input": {"amount": 5}, "reason": "money",
        "approvers": ["role:finance"], "path": ["child-1"]}
    assert body["four_eyes"] is False  # listed even when False (the call's own wire view leaves it off)
    assert (body["prompt_id"], body["can_decide"], body["links"]["self"]) == ("p1", True, "/prompts/p1")


def test_a_field_the_call_gains_reaches_the_row_without_a_copy() -> None:
    """No field-by-field copy: every field of PendingApproval is a field of the row."""
    assert set(PendingApproval.model_fields) <= set(PendingApprovalItem.model_fields)
    four_eyes = PendingApprovalItem.of(_call(four_eyes=True), can_decide=False, links=Links(self="/prompts/p1"))
    assert json.loads(four_eyes.model_dump_json())["four_eyes"] is True


def test_the_items_schema_names_exactly_the_fields_its_json_carries() -> None:
    """The OpenAPI schema of the item leaves out the view's fields for the workflow alone, as the JSON does
    (`undelivered`: listed when a step could not be delivered)."""
    assert set(PendingApprovalItem.model_json_schema(mode="serialization")["properties"]) == JSON_FIELDS | {
        "undelivered"}
