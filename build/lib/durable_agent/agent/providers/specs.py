"""Model specs as configured: `provider:model`, and a tier's fallback chain `spec,spec,...`."""

from __future__ import annotations


def chain_specs(chain: str) -> list[str]:
    """A tier's specs in fallback order (`openai:gpt-5,anthropic:claude-sonnet-4-5`), stripped; may hold
    empty ones, which `resolve_chain` refuses."""
    return [part.strip() for part in chain.split(",")]


def provider_of(spec: str) -> str:
    """The `provider` of a `provider:model` spec (the name provider queues and rates are keyed by)."""
    return spec.strip().partition(":")[0]
