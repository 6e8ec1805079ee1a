"""Spans and metrics recorded by the activities, by the OpenTelemetry GenAI semantic conventions: one `chat
{model}` span per model call attempt with every GenAI attribute the call carries (usage with cache and reasoning
tokens, request parameters, conversation, error type), its `gen_ai.client.token.usage` and
`gen_ai.client.operation.duration` measurements, and one `execute_tool {tool}` span per tool call attempt. The
spans are children of the workflow's round and tool-call spans (the trace context travels in the activity's
Temporal headers). Span attribute names come from `opentelemetry-semantic-conventions` (agent/otel.py); prompt
and completion text are recorded only when `record_content` is on (DAGENT_TRACE_CONTENT).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from temporalio import activity

from durable_agent.agent import metric_names, otel
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.workflows.telemetry import error_status, span_kind, tracer

if TYPE_CHECKING:  # OpenTelemetry is imported only when tracing is on (agent/otel.py)
    from opentelemetry.trace import Span


def request_model(provider: ModelProvider) -> str:
    return str(getattr(provider, "model", "") or provider.name)


def request_attributes(provider: ModelProvider, request: ModelRequest, conversation_id: str | None,
                       ) -> dict[str, Any]:
    """The chat span's attributes known before the call: operation, provider, model, conversation and the
    request parameters that are set."""
    g = otel.gen_ai()
    settings = request.settings
    attributes: dict[str, Any] = {
        g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.CHAT.value,
        g.GEN_AI_PROVIDER_NAME: metric_names.provider_name(provider.name), "dagent.provider": provider.name,
        g.GEN_AI_REQUEST_MODEL: request_model(provider),
        "dagent.prompt.id": request.prompt_id, "dagent.round": request.round,
        "dagent.attempt": activity.info().attempt,
    }
    given = {g.GEN_AI_CONVERSATION_ID: conversation_id or None, g.GEN_AI_REQUEST_TEMPERATURE: settings.temperature,
             g.GEN_AI_REQUEST_TOP_P: settings.top_p, g.GEN_AI_REQUEST_MAX_TOKENS: settings.max_output_tokens,
             g.GEN_AI_REQUEST_SEED: settings.seed, g.GEN_AI_REQUEST_STOP_SEQUENCES: settings.stop}
    attributes.update({key: value for key, value in given.items() if value is not None})
    return attributes


class ModelCall:
    """The span and measurements of one model call attempt."""

    def __init__(self, span: Span, provider: ModelProvider, record_content: bool) -> None:
        self.span = span
        self.model = request_model(provider)
        self.provider = metric_names.provider_name(provider.name)
        self.record_content = record_content
        self.response_model = ""

    def metric_attributes(self) -> dict[str, str]:
        found = {metric_names.OPERATION_NAME: "chat", metric_names.PROVIDER_NAME: self.provider,
                 metric_names.REQUEST_MODEL: self.model}
        return found | ({metric_names.RESPONSE_MODEL: self.response_model} if self.response_model else {})

    def responded(self, response: ModelResponse) -> None:
        usage = response.usage
        self.response_model = response.model or self.model
        histogram = activity.metric_meter().create_histogram(
            metric_names.name_of(metric_names.TOKEN_USAGE), metric_names.TOKEN_USAGE.description,
            metric_names.TOKEN_USAGE.unit)
        for token_type, tokens in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            histogram.record(tokens, metric_names.attributes(
                self.metric_attributes() | {metric_names.TOKEN_TYPE: token_type}))
        if not self.span.is_recording():
            return
        g = otel.gen_ai()
        finish = "tool_calls" if response.tool_calls else "stop"
        self.span.set_attributes({
            g.GEN_AI_RESPONSE_MODEL: self.response_model,
            g.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
            g.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens,
            g.GEN_AI_RESPONSE_FINISH_REASONS: [finish],
        })
        for key, tokens in ((g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens),
                            (g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens),
                            (g.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens)):
            if tokens:
                self.span.set_attribute(key, tokens)
        if response.response_id:
            self.span.set_attribute(g.GEN_AI_RESPONSE_ID, response.response_id)
        if usage.cost is not None:
            self.span.set_attribute("dagent.usage.cost_usd", usage.cost)
        if self.record_content:
            self.span.set_attribute(g.GEN_AI_OUTPUT_MESSAGES, json.dumps([{
                "role": "assistant", "finish_reason": finish,
                "parts": ([{"type": "text", "content": response.text}] if response.text else []) + [
                    {"type": "tool_call", "id": c.id, "name": c.tool, "arguments": c.arguments}
                    for c in response.tool_calls],
            }], ensure_ascii=False, default=str))


@contextmanager
def model_call(provider: ModelProvider, request: ModelRequest, *, record_content: bool,
               conversation_id: str | None = None) -> Iterator[ModelCall]:
    """Span `chat {model}` around the call, and its `gen_ai.client.operation.duration` (with `error.type` when
    it failed)."""
    model = request_model(provider)
    tracing = otel.api() is not None
    attributes = request_attributes(provider, request, conversation_id) if tracing else {}
    started = time.monotonic()
    error_type: str | None = None
    with tracer().start_as_current_span(f"chat {model}", kind=span_kind("CLIENT"), attributes=attributes,
                                         record_exception=False, set_status_on_exception=False) as span:
        call = ModelCall(span, provider, record_content)
        if record_content and tracing:
            g = otel.gen_ai()
            span.set_attribute(g.GEN_AI_SYSTEM_INSTRUCTIONS, request.instructions)
            span.set_attribute(g.GEN_AI_INPUT_MESSAGES, json.dumps(
                [m.model_dump(mode="json") for m in request.messages], ensure_ascii=False))
        try:
            yield call
        except BaseException as exc:
            error_type = type(exc).__name__
            if tracing:
                span.set_attribute(otel.error_type(), error_type)
            span.set_status(error_status(f"{error_type}: {exc}"))
            raise
        finally:
            duration = metric_names.OPERATION_DURATION
            failed = {metric_names.ERROR_TYPE: error_type} if error_type else {}
            activity.metric_meter().create_histogram_float(
                metric_names.name_of(duration), duration.description, duration.unit,
            ).record(time.monotonic() - started, metric_names.attributes(call.metric_attributes() | failed))


@contextmanager
def tool_call(tool: str, call_id: str, prompt_id: str) -> Iterator[Span]:
    """Span `execute_tool {tool}` for one attempt; the caller sets `dagent.tool.outcome`."""
    attributes: dict[str, str | int] = {}
    if otel.api() is not None:
        g = otel.gen_ai()
        attributes = {g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.EXECUTE_TOOL.value,
                      g.GEN_AI_TOOL_NAME: tool, g.GEN_AI_TOOL_CALL_ID: call_id,
                      "dagent.prompt.id": prompt_id, "dagent.attempt": activity.info().attempt}
    with tracer().start_as_current_span(f"execute_tool {tool}", kind=span_kind("INTERNAL"), attributes=attributes,
                                         record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            if otel.api() is not None:
                span.set_attributes({otel.error_type(): type(exc).__name__, "dagent.tool.outcome": "raised"})
            span.set_status(error_status(f"{type(exc).__name__}: {exc}"))
            raise


def tool_outcome(span: Span, outcome: str, error: str | None = None) -> None:
    span.set_attribute("dagent.tool.outcome", outcome)
    if error is not None:
        span.set_status(error_status(error[:200]))
