"""Spans as plain records, whether they come from the OTel SDK's in-memory exporter or an OTLP request, and
the tree checks the tracing tests share."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durable_agent.config.observability import install_tracer_provider


@dataclass(frozen=True)
class SpanRecord:
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any] = field(hash=False, compare=False)
    links: tuple[str, ...] = ()  # linked span ids
    error: bool = False

    @classmethod
    def of(cls, span: ReadableSpan) -> SpanRecord:
        ctx = span.get_span_context()
        assert ctx is not None
        return cls(name=span.name, trace_id=format(ctx.trace_id, "032x"), span_id=format(ctx.span_id, "016x"),
                   parent_id=format(span.parent.span_id, "016x") if span.parent else None,
                   attributes=dict(span.attributes or {}),
                   links=tuple(format(link.context.span_id, "016x") for link in span.links),
                   error=span.status.status_code.name == "ERROR")


_exporter: InMemorySpanExporter | None = None


def memory_exporter() -> InMemorySpanExporter:
    """The process's in-memory exporter on the replay-safe tracer provider (installed once per process)."""
    global _exporter
    if _exporter is None:
        _exporter = InMemorySpanExporter()
        install_tracer_provider([SimpleSpanProcessor(_exporter)])
    return _exporter


def finished_spans() -> list[SpanRecord]:
    return [SpanRecord.of(span) for span in memory_exporter().get_finished_spans()]


def of_trace(spans: list[SpanRecord], trace_id: str) -> list[SpanRecord]:
    return [s for s in spans if s.trace_id == trace_id]


def assert_no_duplicates(spans: list[SpanRecord]) -> None:
    counts = Counter(s.span_id for s in spans)
    duplicated = {s.name for s in spans if counts[s.span_id] > 1}
    assert not duplicated, f"spans exported more than once: {sorted(duplicated)}"


def parent_of(spans: list[SpanRecord], span: SpanRecord) -> SpanRecord | None:
    return next((s for s in spans if s.span_id == span.parent_id), None)


def ancestry(spans: list[SpanRecord], span: SpanRecord) -> list[str]:
    """The names from `span` up to the root."""
    names = [span.name]
    current = parent_of(spans, span)
    while current is not None:
        names.append(current.name)
        current = parent_of(spans, current)
    return names


def render_tree(spans: list[SpanRecord]) -> str:
    children: dict[str | None, list[SpanRecord]] = {}
    ids = {s.span_id for s in spans}
    for s in spans:
        children.setdefault(s.parent_id if s.parent_id in ids else None, []).append(s)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for s in children.get(parent, []):
            lines.append("  " * depth + s.name)
            walk(s.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)
