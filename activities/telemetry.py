"""Spans and metrics recorded by the activities: one span per model call attempt, following the OpenTelemetry
GenAI semantic conventions, and one per tool call attempt. The spans are children of the workflow's round and
tool-call spans (the trace context travels in the activity's Temporal headers). Prompt and completion text
are recorded only when `record_content` is on (DAGENT_TRACE_CONTENT).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import activity

from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.workflows.telemetry import error_status, span_kind, tracer

if TYPE_CHECKING:  # OpenTelemetry is imported only when tracing is on (agent/otel.py)
    from opentelemetry.trace import Span


def request_model(provider: ModelProvider) -> str:
    return str(getattr(provider, "model", "") or provider.name)


class ModelCall:
    """The span and latency measurement of one model call attempt."""

    def __init__(self, span: Span, model: str, record_content: bool) -> None:
        self.span = span
        self.model = model
        self.record_content = record_content

    def responded(self, response: ModelResponse) -> None:
        usage = response.usage
        finish = "tool_calls" if response.tool_calls else "stop"
        self.span.set_attributes({
            "gen_ai.response.model": response.model or self.model,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": [finish],
        })
        if usage.cost is not None:
            self.span.set_attribute("dagent.usage.cost_usd", usage.cost)
        if self.record_content:
            self.span.set_attribute("gen_ai.output.messages", json.dumps([{
                "role": "assistant", "finish_reason": finish,
                "parts": ([{"type": "text", "content": response.text}] if response.text else []) + [
                    {"type": "tool_call", "id": c.id, "name": c.tool, "arguments": c.arguments}
                    for c in response.tool_calls],
            }], ensure_ascii=False, default=str))


@contextmanager
def model_call(provider: ModelProvider, request: ModelRequest, *, record_content: bool) -> Iterator[ModelCall]:
    """Span `chat {model}` around the call, and the `dagent_model_call_seconds` histogram by model and outcome."""
    model = request_model(provider)
    attempt = activity.info().attempt
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider.name, "gen_ai.request.model": model,
        "dagent.prompt.id": request.prompt_id, "dagent.round": request.round, "dagent.attempt": attempt,
    }
    started = time.monotonic()
    outcome = "error"
    with tracer().start_as_current_span(f"chat {model}", kind=span_kind("CLIENT"), attributes=attributes,
                                         record_exception=False, set_status_on_exception=False) as span:
        if record_content:
            span.set_attribute("gen_ai.system_instructions", request.instructions)
            span.set_attribute("gen_ai.input.messages", json.dumps(
                [m.model_dump(mode="json") for m in request.messages], ensure_ascii=False))
        try:
            yield ModelCall(span, model, record_content)
            outcome = "success"
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(error_status(f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            activity.metric_meter().create_histogram_timedelta(
                "dagent_model_call_seconds", "Model call latency by model and outcome",
            ).record(timedelta(seconds=time.monotonic() - started), {"model": model, "outcome": outcome})


@contextmanager
def tool_call(tool: str, call_id: str, prompt_id: str) -> Iterator[Span]:
    """Span `execute_tool {tool}` for one attempt; the caller sets `dagent.tool.outcome`."""
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
        "dagent.prompt.id": prompt_id, "dagent.attempt": activity.info().attempt,
    }
    with tracer().start_as_current_span(f"execute_tool {tool}", kind=span_kind("INTERNAL"), attributes=attributes,
                                         record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attributes({"error.type": type(exc).__name__, "dagent.tool.outcome": "raised"})
            span.set_status(error_status(f"{type(exc).__name__}: {exc}"))
            raise


def tool_outcome(span: Span, outcome: str, error: str | None = None) -> None:
    span.set_attribute("dagent.tool.outcome", outcome)
    if error is not None:
        span.set_status(error_status(error[:200]))
