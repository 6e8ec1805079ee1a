"""Temporal task `Priority` for prompts: what runs first when workers are behind (docs/operations.md).

A prompt's priority travels with its workflow start; its model calls, tools and sub-agents inherit it
(Temporal copies a workflow's priority to the activities and children it starts unless they set their own).

- `priority_key`: 1 (first) .. 5 (last); unset = the server's default, 3.
- `fairness_key`: tasks of one key are dispatched in proportion to its weight against other keys, so one
  busy user or tenant cannot starve the rest. Default: the prompt's user id (the API's authenticated
  principal), so fairness is per user out of the box; pass a tenant id to balance by tenant instead.
- `fairness_weight`: that key's share (server clamps to 0.001..1000; default 1.0).
"""

from __future__ import annotations

import hashlib

from temporalio.common import Priority

__all__ = ["MAX_FAIRNESS_KEY_BYTES", "MAX_PRIORITY_KEY", "fairness_key_for", "prompt_priority"]

MAX_PRIORITY_KEY = 5  # the server's default `matching.priorityLevels`
MAX_FAIRNESS_KEY_BYTES = 64


def fairness_key_for(value: str) -> str:
    """`value` as a fairness key: itself when it fits in 64 bytes, else a prefix plus a digest (still one key
    per value)."""
    raw = value.encode()
    if len(raw) <= MAX_FAIRNESS_KEY_BYTES:
        return value
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return raw[:MAX_FAIRNESS_KEY_BYTES - 17].decode(errors="ignore") + "~" + digest


def prompt_priority(user_id: str, *, priority_key: int | None = None, fairness_key: str | None = None,
                    fairness_weight: float | None = None) -> Priority:
    """The `Priority` a prompt starts with; `ValueError` (one line) for an out-of-range key or weight."""
    if priority_key is not None and not 1 <= priority_key <= MAX_PRIORITY_KEY:
        raise ValueError(f"priority must be 1 (first) to {MAX_PRIORITY_KEY} (last), not {priority_key}")
    if fairness_weight is not None and not 0.001 <= fairness_weight <= 1000:
        raise ValueError(f"fairness weight must be between 0.001 and 1000, not {fairness_weight:g}")
    if fairness_key is not None and not fairness_key.strip():
        raise ValueError("fairness key must not be empty")
    return Priority(priority_key=priority_key, fairness_key=fairness_key_for(fairness_key or user_id),
                    fairness_weight=fairness_weight)
