"""Prices per million tokens and the cost of a model call's usage."""

from __future__ import annotations

import json

import pytest

from durable_agent.agent.models import Usage
from durable_agent.agent.pricing import PRICES_ENV, Price, PriceTable

TABLE = {
    "gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
    "claude-3-5-haiku": {"input": 0.8, "output": 4},
}


def test_cost_of_uncached_input_and_output() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, model_calls=1)
    assert table.cost("gpt-4o", usage) == pytest.approx(2.5 + 5.0)


def test_cached_tokens_use_the_cached_price() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    # input_tokens includes the cached ones (the Usage convention of every adapter).
    usage = Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=0)
    assert table.cost("gpt-4o", usage) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25)


def test_cached_tokens_fall_back_to_the_input_price() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    usage = Usage(input_tokens=2_000_000, cached_tokens=1_000_000, output_tokens=1_000_000)
    assert table.cost("claude-3-5-haiku", usage) == pytest.approx(2 * 0.8 + 4)


def test_reasoning_tokens_are_not_charged_twice() -> None:
    price = Price(input=1, output=2)
    assert price.cost(Usage(output_tokens=1_000_000, reasoning_tokens=600_000)) == pytest.approx(2)


def test_unknown_model_has_no_cost() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    assert table.cost("mystery-model", Usage(input_tokens=10)) is None
    assert PriceTable().cost("gpt-4o", Usage(input_tokens=10)) is None
    assert "gpt-4o" in table and "mystery-model" not in table


def test_model_names_match_snapshots_and_provider_prefixes_but_not_siblings() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    usage = Usage(input_tokens=1_000_000)
    assert table.cost("gpt-4o-2024-08-06", usage) == pytest.approx(2.5)
    assert table.cost("openai:gpt-4o", usage) == pytest.approx(2.5)
    assert table.cost("claude-3-5-haiku-20241022", usage) == pytest.approx(0.8)
    assert table.cost("claude-3-5-haiku-latest", usage) == pytest.approx(0.8)
    assert table.cost("gpt-4o-mini", usage) is None


def test_with_cost_fills_usage_and_sums() -> None:
    table = PriceTable.from_json(json.dumps(TABLE))
    first = table.with_cost("gpt-4o", Usage(input_tokens=1_000_000, model_calls=1))
    second = table.with_cost("nope", Usage(input_tokens=5, model_calls=1))
    assert first.cost == pytest.approx(2.5) and second.cost is None
    assert (first + second).cost == pytest.approx(2.5)


def test_from_env_inline_json_and_file(tmp_path) -> None:
    inline = PriceTable.from_env({PRICES_ENV: json.dumps(TABLE)})
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(TABLE))
    from_file = PriceTable.from_env({PRICES_ENV: str(path)})
    assert inline == from_file and len(inline) == 2
    assert inline.root["gpt-4o"] == Price(input=2.5, output=10, cached_input=1.25)
    assert len(PriceTable.from_env({})) == 0
    assert len(PriceTable.from_env({PRICES_ENV: "  "})) == 0


def test_bad_price_tables_are_clear_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="invalid price table"):
        PriceTable.from_json('{"gpt-4o": {"input": -1, "output": 1}}')
    with pytest.raises(ValueError, match="invalid price table"):
        PriceTable.from_json('{"gpt-4o": {"input": 1}}')
    with pytest.raises(ValueError, match="invalid price table"):
        PriceTable.from_env({PRICES_ENV: "{not json"})
    with pytest.raises(ValueError, match="cannot read price file"):
        PriceTable.from_env({PRICES_ENV: str(tmp_path / "missing.json")})
