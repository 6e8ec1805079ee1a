"""Comparing prompt records across runs: the output array without the fields that differ by timing."""

from __future__ import annotations

from typing import Any

from durable_agent.agent.models import Prompt

VOLATILE_KEYS = frozenset({"started_at", "finished_at", "requested_at", "expires_at", "at"})


def shape(prompt: Prompt) -> list[Any]:
    """The output array without timestamps: entry types, ids, tools, inputs, results, decisions."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(entry.model_dump(mode="json")) for entry in prompt.output]
