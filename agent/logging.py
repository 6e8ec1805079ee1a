"""structlog setup: key-value lines on a TTY, JSON lines otherwise. Never log secrets or full payloads."""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from durable_agent.agent import otel

# structlog's package imports its console renderer's optional helpers whenever they are installed: rich (its
# traceback with pygments, its pretty-printer with attrs) and colorama, about 3 MiB of a worker's RSS. A
# process whose stderr is not a terminal writes JSON lines and never renders through them, so it imports
# structlog with them hidden (the console renderer, if asked for there, prints plain tracebacks).
CONSOLE_ONLY_PACKAGES = ("rich", "colorama")


def _stderr_is_a_terminal() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


def _import_structlog(console: bool) -> ModuleType:
    """structlog; unless `console`, imported while `CONSOLE_ONLY_PACKAGES` look absent (each import of theirs
    fails; their modules, if already loaded, are put back untouched)."""
    if console or "structlog" in sys.modules:
        import structlog
        return structlog
    loaded = {name: sys.modules[name] for name in CONSOLE_ONLY_PACKAGES if name in sys.modules}
    sys.modules.update(dict.fromkeys(CONSOLE_ONLY_PACKAGES))  # None in sys.modules: `import rich` raises ImportError
    try:
        import structlog
    finally:
        for name in CONSOLE_ONLY_PACKAGES:
            del sys.modules[name]
        sys.modules.update(loaded)
    return structlog


if TYPE_CHECKING:
    import structlog
else:
    structlog = _import_structlog(console=_stderr_is_a_terminal())


def add_trace_ids(_logger: object, _method: str, event: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """Bind the current OpenTelemetry trace and span ids, so a log line leads to its prompt's trace."""
    trace = otel.api()
    if trace is None:  # tracing is off: there is no span
        return event
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    as_json = (not _stderr_is_a_terminal()) if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
