"""Model prices and the cost of a model call's `Usage`.

Pure, no Temporal imports. Prices are US dollars per million tokens. A price table is JSON mapping a model
name (as providers report it in `ModelResponse.model`) to its price::

    {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
     "claude-sonnet-4-5": {"input": 3, "output": 15, "cached_input": 0.3, "cache_write": 3.75}}

Workers read it from `DAGENT_PRICES`, which holds either that JSON inline or the path of a file with it.

Token conventions follow `Usage`: `input_tokens` counts every prompt token, cached ones included, and
`cached_tokens` (read from the cache) and `cache_write_tokens` (written to it, Anthropic) are parts of it;
reasoning tokens are already part of `output_tokens`. So a call costs
`(input - cached - written) * input + cached * cached_input + written * cache_write + output * output`, per
million tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ConfigDict, Field, RootModel, ValidationError

from durable_agent.agent.models import Usage
from durable_agent.agent.strict import StrictModel

PRICES_ENV = "DAGENT_PRICES"
PER_TOKENS = 1_000_000
_SNAPSHOT_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class Price(StrictModel):
    """US dollars per million tokens. `cached_input` and `cache_write` default to the `input` price when not
    given (Anthropic charges 1.25x input for 5-minute cache writes: set `cache_write` to price them)."""

    model_config = ConfigDict(frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        total = max(usage.input_tokens, 0)
        cached = min(max(usage.cached_tokens, 0), total)
        written = min(max(usage.cache_write_tokens, 0), total - cached)
        uncached = total - cached - written
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        return (uncached * self.input + cached * cached_price + written * write_price
                + max(usage.output_tokens, 0) * self.output) / PER_TOKENS


class PriceTable(RootModel[dict[str, Price]]):
    """Model name -> `Price`. Empty by default: then every cost is `None` (unknown, not free)."""

    root: dict[str, Price] = Field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> PriceTable:
        """Parse `{"model": {"input": ..., "output": ..., "cached_input": ...}, ...}`."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise ValueError(f"invalid price table: {exc}") from exc

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PriceTable:
        """Read `DAGENT_PRICES` from `env`: inline JSON (starts with `{`) or a path to a JSON file."""
        return cls.load(env.get(PRICES_ENV, ""))

    @classmethod
    def load(cls, value: str) -> PriceTable:
        """A `DAGENT_PRICES` value: inline JSON (starts with `{`) or a path to a JSON file. Empty -> empty."""
        value = value.strip()
        if not value:
            return cls()
        if value.startswith("{"):
            return cls.from_json(value)
        path = Path(value).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{PRICES_ENV}: cannot read price file {str(path)!r}: {exc}") from exc
        try:
            return cls.from_json(text)
        except ValueError as exc:
            raise ValueError(f"{PRICES_ENV}: {path}: {exc}") from exc

    def price_for(self, model: str) -> Price | None:
        """The price of `model`: an exact match first, then without a `provider:` prefix, then without a
        dated snapshot suffix (`gpt-4o-2024-08-06` -> `gpt-4o`, `claude-3-5-haiku-20241022`, `...-latest`).
        """
        candidates = [model]
        if ":" in model:
            candidates.append(model.split(":", 1)[1])
        candidates += [_SNAPSHOT_SUFFIX.sub("", c) for c in candidates]
        return next((self.root[c] for c in candidates if c in self.root), None)

    def cost(self, model: str, usage: Usage) -> float | None:
        """The cost in US dollars of `usage` on `model`; `None` when the model has no price."""
        price = self.price_for(model)
        return None if price is None else price.cost(usage)

    def with_cost(self, model: str, usage: Usage) -> Usage:
        """`usage` with its `cost` filled in (left as it was when the model has no price)."""
        cost = self.cost(model, usage)
        return usage if cost is None else usage.model_copy(update={"cost": cost})

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.price_for(model) is not None

    def __len__(self) -> int:
        return len(self.root)
