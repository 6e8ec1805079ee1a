"""A prompt's spans as an indented tree for the terminal (`dagent demo --trace`), collected in memory."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durable_agent.config.observability import install_tracer_provider

# The attributes worth a glance in a terminal; everything else is in the span itself.
SHOWN_ATTRIBUTES = (
    "dagent.prompt.state", "dagent.round", "gen_ai.request.model", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "dagent.tool.call_id", "dagent.attempt",
    "dagent.tool.outcome", "dagent.approval.decision", "dagent.approval.decided_by", "dagent.approval.wait_seconds",
)


def collect_in_memory() -> InMemorySpanExporter:
    """Install the replay-safe tracer provider with an in-memory exporter: spans stay in this process."""
    exporter = InMemorySpanExporter()
    install_tracer_provider([SimpleSpanProcessor(exporter)])
    return exporter


def _attributes(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    parts = []
    for key in SHOWN_ATTRIBUTES:
        if key in attributes:
            value = attributes[key]
            if isinstance(value, tuple):
                value = ",".join(str(v) for v in value)
            elif isinstance(value, float):
                value = f"{value:.2f}"
            parts.append(f"{key.rsplit('.', 1)[-1]}={value}")
    return " ".join(parts)


def trace_tree(spans: Sequence[ReadableSpan], trace_id: str) -> list[str]:
    """The spans of one trace, parents before children, with durations and the main attributes."""
    mine = [s for s in spans if s.context is not None and format(s.context.trace_id, "032x") == trace_id]
    ids = {s.context.span_id for s in mine if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(mine, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            millis = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            lines.append(f"{'  ' * depth}{span.name}  {millis:.1f} ms  {_attributes(span)}".rstrip())
            if span.context is not None:
                walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines
