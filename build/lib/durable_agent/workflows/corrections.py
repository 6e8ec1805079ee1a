"""Approving with corrections: the approver's fields are merged into the model's input (JSON merge patch,
RFC 7396) and the result is checked against the tool's input schema before the approval is taken.

Pure functions, deterministic: the workflow's update validator and signal handler call them, so an invalid
correction is refused while the call stays pending.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from pydantic import JsonValue

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
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    detail = "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors)
    return detail[:MAX_ERROR_CHARS]
