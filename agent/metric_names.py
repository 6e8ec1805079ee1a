"""The metrics Durable Agent records, by the OpenTelemetry GenAI semantic conventions where they cover one
(`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`) and in the same dotted style where none does
(`dagent.*`), and how each is spelled for the exporter the process uses.

OTLP carries the names, units and attribute keys as written. The Temporal runtime's Prometheus endpoint refuses
a dotted name or label (it drops the values), so a Prometheus process uses OpenTelemetry's Prometheus
spelling, as a collector's Prometheus exporter renders the same metrics: dots become underscores, a unit of
seconds or bytes adds `_seconds` / `_bytes`, a `{annotation}` unit adds nothing, and the runtime adds `_total`
to counters (`gen_ai.client.token.usage` -> `gen_ai_client_token_usage_bucket{gen_ai_token_type="input"}`).

The convention names are literals here, since metrics need no extra; tests/unit/test_metric_names.py checks them
against `opentelemetry-semantic-conventions`. Pure: no Temporal, no OpenTelemetry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

AttributeValue = str | int | float | bool

# Attribute keys (the same strings as the span attributes: opentelemetry.semconv ... gen_ai_attributes).
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
TOKEN_TYPE = "gen_ai.token.type"
TOOL_NAME = "gen_ai.tool.name"
ERROR_TYPE = "error.type"


# gen_ai.provider.name by our provider adapters' names: the conventions' well-known values (one per API
# surface, whatever the wire protocol); an adapter without one (`scripted`, a plugin's own) keeps its name.
PROVIDER_NAMES = {
    "openai": "openai", "openai-chat": "openai", "anthropic": "anthropic",
    "azure": "azure.ai.openai", "azure-chat": "azure.ai.openai",
    "anthropic-vertex": "gcp.vertex_ai", "anthropic-bedrock": "aws.bedrock",
}


def provider_name(adapter: str) -> str:
    return PROVIDER_NAMES.get(adapter, adapter)


@dataclass(frozen=True)
class Instrument:
    name: str
    kind: Literal["counter", "histogram", "gauge"]
    unit: str
    description: str
    replaces: str = ""  # the dagent_* name it had before 0.1.0 (docs/observability.md keeps the mapping)


TOKEN_USAGE = Instrument("gen_ai.client.token.usage", "histogram", "{token}",
                         "Tokens per model call, by gen_ai.token.type (input, output)", "dagent_model_tokens_total")
OPERATION_DURATION = Instrument("gen_ai.client.operation.duration", "histogram", "s",
                                "Duration of a model call (each attempt)", "dagent_model_call_seconds")
MODEL_ROUNDS = Instrument("dagent.model.rounds", "counter", "{round}", "Model rounds of prompts",
                          "dagent_model_rounds_total")
MODEL_COST = Instrument("dagent.model.cost", "histogram", "{USD}", "Cost per model round in USD (sum: total)",
                        "dagent_model_cost_usd")
TOOL_CALLS = Instrument("dagent.tool.calls", "counter", "{call}", "Tool calls by tool and outcome",
                        "dagent_tool_calls_total")
APPROVAL_REQUESTS = Instrument("dagent.approval.requests", "counter", "{request}", "Approvals requested",
                               "dagent_approvals_requested_total")
APPROVAL_DECISIONS = Instrument("dagent.approval.decisions", "counter", "{decision}",
                                "Approvals decided (approved, rejected, expired, superseded)",
                                "dagent_approvals_decided_total")
APPROVAL_WAIT = Instrument("dagent.approval.wait.duration", "histogram", "s",
                           "Time from approval request to decision", "dagent_approval_wait_seconds")
PROMPTS_FINISHED = Instrument("dagent.prompt.finished", "counter", "{prompt}", "Prompts by final state",
                              "dagent_prompts_finished_total")
BUDGET_SPENT_TOKENS = Instrument("dagent.budget.spent.tokens", "gauge", "{token}",
                                 "Tokens spent in the budget's current period", "dagent_budget_spent_tokens")
BUDGET_SPENT_COST = Instrument("dagent.budget.spent.cost", "gauge", "{USD}",
                               "Cost spent in the budget's current period", "dagent_budget_spent_cost")
BUDGET_LIMIT_TOKENS = Instrument("dagent.budget.limit.tokens", "gauge", "{token}",
                                 "Token budget per period, extra grants included", "dagent_budget_limit_tokens")
BUDGET_LIMIT_COST = Instrument("dagent.budget.limit.cost", "gauge", "{USD}",
                               "Cost budget per period, extra grants included", "dagent_budget_limit_cost")
# New in 0.1.0, so not in INSTRUMENTS (which maps the renamed ones): approval notifications (activities/notify.py).
APPROVAL_NOTIFICATIONS = Instrument("dagent.approval.notifications", "counter", "{attempt}",
                                    "Attempts to tell approvers of a waiting call, by channel and outcome")

INSTRUMENTS = (TOKEN_USAGE, OPERATION_DURATION, MODEL_ROUNDS, MODEL_COST, TOOL_CALLS, APPROVAL_REQUESTS,
               APPROVAL_DECISIONS, APPROVAL_WAIT, PROMPTS_FINISHED, BUDGET_SPENT_TOKENS, BUDGET_SPENT_COST,
               BUDGET_LIMIT_TOKENS, BUDGET_LIMIT_COST)

# The conventions' advised explicit bucket boundaries (the runtime's defaults suit neither tokens nor seconds).
BUCKETS: dict[Instrument, tuple[float, ...]] = {
    TOKEN_USAGE: (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864),
    OPERATION_DURATION: (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92),
}

_UNIT_SUFFIXES = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}
_prometheus = False


def use_prometheus_names(on: bool = True) -> None:
    """Spell every metric of this process for a Prometheus endpoint (`config.observability.metrics_runtime` does
    it for a Prometheus configuration; call it when you give the worker a Prometheus runtime of your own)."""
    global _prometheus
    _prometheus = on


def prometheus_name(instrument: Instrument) -> str:
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", instrument.name)
    suffix = _UNIT_SUFFIXES.get(instrument.unit)
    return f"{name}_{suffix}" if suffix and not name.endswith(f"_{suffix}") else name


def name_of(instrument: Instrument) -> str:
    """The instrument's name for this process's exporter."""
    return prometheus_name(instrument) if _prometheus else instrument.name


def attributes(values: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """Attribute keys for this process's exporter (`gen_ai.token.type` -> `gen_ai_token_type` for Prometheus)."""
    if not _prometheus:
        return dict(values)
    return {key.replace(".", "_"): value for key, value in values.items()}


def bucket_overrides(prometheus: bool) -> dict[str, list[float]]:
    """The runtime's histogram bucket overrides, keyed by the names that exporter sees."""
    return {(prometheus_name(i) if prometheus else i.name): list(b) for i, b in BUCKETS.items()}
