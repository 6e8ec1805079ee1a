"""Spans and metrics recorded by workflow code; both are replay-safe and neither adds a command.

Spans: the global tracer provider is temporalio's `ReplaySafeTracerProvider` when tracing is on (span and
trace ids come from the workflow's seeded random, so a replay recreates the same ids; a span that ends during
replay is dropped, so nothing is exported twice), and OpenTelemetry's no-op tracer when it is off.
Metrics: `workflow.metric_meter()`, which records nothing while the workflow replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent import metric_names, otel
    from durable_agent.agent.logging import get_logger
    from durable_agent.agent.models import Usage

if TYPE_CHECKING:  # OpenTelemetry is imported only when tracing is on (agent/otel.py)
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Span, Tracer

TRACER_NAME = "durable_agent"

PROMPT_SPAN = "invoke_agent"  # `invoke_agent {agent}`, the agent being the worker's task queue
ROUND_SPAN = "dagent.round"
TOOL_SPAN = "dagent.tool_call"
APPROVAL_SPAN = "dagent.approval"
CONVERSATION_TURN_SPAN = "dagent.conversation.prompt"


class _NoSpanContext:
    is_valid = False
    trace_id = 0
    span_id = 0


class _NoSpan:
    """The span of a process without tracing: records nothing (OpenTelemetry's non-recording span, without
    importing OpenTelemetry)."""

    def get_span_context(self) -> _NoSpanContext:
        return _NoSpanContext()

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: object) -> None:
        pass

    def set_attributes(self, attributes: object) -> None:
        pass

    def set_status(self, status: object, description: str | None = None) -> None:
        pass

    def end(self, end_time: int | None = None) -> None:
        pass


class _NoTracer:
    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Span:
        return NO_SPAN

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[Span]:
        yield NO_SPAN


NO_SPAN: Span = _NoSpan()  # type: ignore[assignment]
_NO_TRACER: Tracer = _NoTracer()  # type: ignore[assignment]


def tracer() -> Tracer:
    """This project's tracer from the current global provider (the same tracer while the provider stays);
    a tracer recording nothing when tracing is off in this process."""
    trace = otel.api()
    return _NO_TRACER if trace is None else _tracer_of(trace.get_tracer_provider())


@functools.lru_cache(maxsize=1)  # spans start every round: the last provider's tracer is kept
def _tracer_of(provider: Any) -> Tracer:
    return provider.get_tracer(TRACER_NAME)  # type: ignore[no-any-return]


def span_kind(name: str) -> Any:
    """`opentelemetry.trace.SpanKind[name]` (CLIENT, INTERNAL, ...), or None when tracing is off."""
    trace = otel.api()
    return None if trace is None else trace.SpanKind[name]


def error_status(description: str) -> Any:
    """An ERROR `Status` with `description`, or None when tracing is off (a no-op span ignores it)."""
    trace = otel.api()
    return None if trace is None else trace.Status(trace.StatusCode.ERROR, description)


def trace_id_of(span: Span) -> str | None:
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


@contextmanager
def _started(name: str, attributes: dict[str, str | int | float | bool], *,
             parent: otel_context.Context | None = None, **options: object) -> Iterator[Span]:
    """A span, current for the block, that ends when the block ends, also on cancellation and on failures of
    the workflow or an activity. It is left unended (never exported) when an exception fails only the workflow
    task (a bug; the retried task records the span again) and when an abandoned workflow coroutine is
    finalised outside the workflow; during replay and eviction temporalio's replay-safe span drops the end.
    The context is detached the way temporalio's own spans do it: an abandoned coroutine may be finalised in
    another context, where there is nothing to detach."""
    trace = otel.api()
    if trace is None:
        yield NO_SPAN
        return
    current = tracer().start_span(name, context=parent, attributes=attributes, record_exception=False,  # type: ignore[arg-type]
                                  set_status_on_exception=False, **options)
    try:
        with within(current):
            yield current
    except BaseException as exc:
        if workflow.in_workflow() and (isinstance(exc, asyncio.CancelledError) or workflow.is_failure_exception(exc)):
            mark_error(current, f"{type(exc).__name__}: {exc}")
            current.end()
        raise
    else:
        current.end()


def prompt_span(prompt_id: str, *, conversation_child: bool, conversation_id: str | None = None
                ) -> AbstractContextManager[Span]:
    """The prompt's span, `invoke_agent {agent}` by the GenAI agent conventions (the agent is the worker's task
    queue: its plugins and models are the agent), from its start to its final state. A prompt a conversation
    started begins its own trace, linked to the conversation's span (one trace per prompt); otherwise the
    client's start is its parent."""
    trace = otel.api()
    if trace is None:
        return nullcontext(NO_SPAN)
    g = otel.gen_ai()
    agent = workflow.info().task_queue
    attributes: dict[str, str | int | float | bool] = {
        g.GEN_AI_OPERATION_NAME: g.GenAiOperationNameValues.INVOKE_AGENT.value, g.GEN_AI_AGENT_NAME: agent,
        "dagent.prompt.id": prompt_id}
    if conversation_id:
        attributes[g.GEN_AI_CONVERSATION_ID] = conversation_id
    if not conversation_child:
        return _started(f"{PROMPT_SPAN} {agent}", attributes)
    parent = trace.get_current_span().get_span_context()
    links = [trace.Link(parent, {"dagent.link": "conversation"})] if parent.is_valid else []
    return _started(f"{PROMPT_SPAN} {agent}", attributes, parent=otel.context_api().Context(), links=links)


def span(name: str, parent: Span | None = None, **attributes: str | int | float | bool
         ) -> AbstractContextManager[Span]:
    """A span under `parent` (by default the current span), current for the block."""
    trace = otel.api()
    context = trace.set_span_in_context(parent) if parent is not None and trace is not None else None
    return _started(name, attributes, parent=context, kind=span_kind("INTERNAL"))


def start_span(name: str, **attributes: str | int | float | bool) -> Span:
    """A child of the current span that outlives the block it was started in (a tool call's span, from its
    record to its outcome, while the calls of one response interleave); end it with `end_span`."""
    return tracer().start_span(name, attributes=attributes, kind=span_kind("INTERNAL"), record_exception=False,
                               set_status_on_exception=False)


def end_span(current: Span, outcome: str) -> None:
    current.set_attribute("dagent.tool.outcome", outcome)
    if outcome != "success":
        mark_error(current, outcome)
    current.end()


@contextmanager
def within(current: Span | None) -> Iterator[None]:
    """Make `current` the parent of the spans started in the block (activities, child workflows) without
    ending it."""
    trace = otel.api()
    if current is None or trace is None:
        yield
        return
    otel_context = otel.context_api()
    token = otel_context.attach(trace.set_span_in_context(current))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a token from another contextvars.Context
            token.var.reset(token)


lifecycle_log = get_logger("durable_agent.prompt")


def log_step(event: str, prompt_id: str, **fields: str | int | float | None) -> None:
    """One INFO line per step of a prompt's life (started, approval requested and decided, finished) with its
    prompt and run ids and, while tracing, its trace id; skipped while the workflow replays history (the line
    was written when the step first ran), as temporalio's replay-safe loggers do."""
    if workflow.in_workflow():
        if workflow.unsafe.is_replaying_history_events():
            return
        fields = {"run_id": workflow.info().run_id, **fields}
    lifecycle_log.info(event, prompt_id=prompt_id, **{k: v for k, v in fields.items() if v is not None})


def mark_error(current: Span, description: str) -> None:
    current.set_status(error_status(description))


def mark_failed(current: Span, description: str) -> None:
    """A failed operation's span: ERROR status and `error.type` (the conventions' `_OTHER`: a prompt's failure
    is told in words, it has no error class)."""
    mark_error(current, description)
    if otel.api() is not None:
        current.set_attribute(otel.error_type(), "_OTHER")


class WorkflowMetrics:
    """The agent's own instruments (agent/metric_names.py), recorded from workflow code through the replay-safe
    workflow meter. Tokens and model call durations are the activity's (gen_ai.client.*, per call)."""

    def __init__(self) -> None:
        meter = workflow.metric_meter()
        self._rounds = meter.create_counter(*spelled(metric_names.MODEL_ROUNDS))
        self._tool_calls = meter.create_counter(*spelled(metric_names.TOOL_CALLS))
        self._cost = meter.create_histogram_float(*spelled(metric_names.MODEL_COST))
        self._approvals_requested = meter.create_counter(*spelled(metric_names.APPROVAL_REQUESTS))
        self._approvals_decided = meter.create_counter(*spelled(metric_names.APPROVAL_DECISIONS))
        self._approval_wait = meter.create_histogram_float(*spelled(metric_names.APPROVAL_WAIT))
        self._prompts = meter.create_counter(*spelled(metric_names.PROMPTS_FINISHED))

    def model_round(self, model: str, usage: Usage) -> None:
        model_only = metric_names.attributes({metric_names.REQUEST_MODEL: model})
        self._rounds.add(1, model_only)
        if usage.cost is not None:
            self._cost.record(usage.cost, model_only)

    def tool_call(self, tool: str, outcome: str) -> None:
        self._tool_calls.add(1, metric_names.attributes({metric_names.TOOL_NAME: tool, "dagent.tool.outcome": outcome}))

    def approval_requested(self, tool: str) -> None:
        self._approvals_requested.add(1, metric_names.attributes({metric_names.TOOL_NAME: tool}))

    def approval_decided(self, tool: str, decision: str, waited: timedelta) -> None:
        labels = metric_names.attributes({metric_names.TOOL_NAME: tool, "dagent.approval.decision": decision})
        self._approvals_decided.add(1, labels)
        self._approval_wait.record(max(waited, timedelta(0)).total_seconds(), labels)

    def prompt_finished(self, state: str) -> None:
        self._prompts.add(1, metric_names.attributes({"dagent.prompt.state": state}))


def spelled(instrument: metric_names.Instrument) -> tuple[str, str, str]:
    """(name, description, unit) for this process's exporter."""
    return metric_names.name_of(instrument), instrument.description, instrument.unit
