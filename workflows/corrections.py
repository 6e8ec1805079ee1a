"""Approving with corrections: the approver's fields are merged into the model's input (JSON merge patch,
RFC 7396) and the result is checked against the tool's input schema before the approval is taken. Then
the tool's approval policy runs again on the merged arguments (in the worker: the `check_correction`
activity), and `correction_refusal` decides whether the approver may approve what they would now need.

Pure functions, deterministic: the workflow's update validator and signal handler call them, so an invalid
correction is refused while the call stays pending.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue
from temporalio import workflow

from durable_agent.agent import identity
from durable_agent.agent.identity import Identity

MAX_ERROR_CHARS = 500


def merge_patch(target: JsonValue, patch: JsonValue) -> JsonValue:
    """RFC 7396: objects merge recursively, `null` removes a field, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def schema_problem(value: JsonValue, schema: dict[str, JsonValue] | None) -> str | None:
    """Why `value` does not match the tool's JSON schema, or None (also when no schema was recorded)."""
    if not schema:
        return None
    # jsonschema loads on the first correction checked, not with the workflows. In a workflow's sandbox it is
    # the worker's own module (passed through), not a copy imported again for each workflow run.
    with workflow.unsafe.imports_passed_through():
        import jsonschema

        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    detail = "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors)
    return detail[:MAX_ERROR_CHARS]


def correction_refusal(who: Identity, needed_approvers: list[str] | None, *, needs_approval: bool,
                       owner: str | None, four_eyes: bool) -> str | None:
    """Why `who`, already allowed to decide the call as the model asked it, may not approve it as corrected,
    or None. `needs_approval`/`needed_approvers`: what the tool's policy says of the corrected arguments
    (arguments that need no approval may be approved by anyone allowed on the original). `four_eyes`: the
    original's or the corrected requirement's rule."""
    if not needs_approval:
        return None
    problem = identity.may_decide(who, needed_approvers, owner=owner, four_eyes=four_eyes)
    if problem is None or problem == identity.FOUR_EYES_REFUSAL:
        return problem
    return f"the corrected arguments need approval by {identity.describe(needed_approvers)}"
