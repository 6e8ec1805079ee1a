"""OpenTelemetry only when tracing is on: the one switch the span helpers consult.

A process that never turns tracing on (`config.observability.install_tracer_provider`, which the OTEL_*
settings, `dagent demo --trace` and the tests call) imports no OpenTelemetry module at all: the span helpers
(workflows/telemetry.py, activities/telemetry.py, the client's start span, the log processor) see `api()`
return None and record nothing, exactly as OpenTelemetry's no-op tracer would. Workflow code imports this
module passed through the sandbox, so sandboxed workflows see the worker process's switch.
"""

from __future__ import annotations

from types import ModuleType

_trace_api: ModuleType | None = None
_context_api: ModuleType | None = None
_gen_ai: ModuleType | None = None
_error: ModuleType | None = None


def enable() -> ModuleType:
    """Turn span recording on for this process; returns `opentelemetry.trace` (needs the `otel` extra)."""
    global _trace_api, _context_api, _gen_ai, _error
    if _trace_api is None:
        from durable_agent.agent.extras import import_extra

        feature = "tracing (OpenTelemetry)"
        _context_api = import_extra("opentelemetry.context", "otel", feature=feature)
        # The attribute names: opentelemetry-semantic-conventions, which the SDK brings (GenAI is incubating).
        _gen_ai = import_extra("opentelemetry.semconv._incubating.attributes.gen_ai_attributes", "otel",
                               feature=feature)
        _error = import_extra("opentelemetry.semconv.attributes.error_attributes", "otel", feature=feature)
        _trace_api = import_extra("opentelemetry.trace", "otel", feature=feature)
    return _trace_api


def api() -> ModuleType | None:
    """`opentelemetry.trace` when tracing is on in this process, else None (nothing to record)."""
    return _trace_api


def _enabled(module: ModuleType | None) -> ModuleType:
    if module is None:
        raise RuntimeError("tracing is off: enable() first")
    return module


def gen_ai() -> ModuleType:
    """`opentelemetry.semconv._incubating.attributes.gen_ai_attributes` (GEN_AI_REQUEST_MODEL, ...); only while
    tracing is on."""
    return _enabled(_gen_ai)


def error_type() -> str:
    """`error.type` from `opentelemetry.semconv.attributes.error_attributes`; only while tracing is on."""
    return str(_enabled(_error).ERROR_TYPE)


def context_api() -> ModuleType:
    """`opentelemetry.context` (the worker process's module, also inside the workflow sandbox); only while
    tracing is on."""
    return _enabled(_context_api)
