"""Logging through the standard library: every line of Durable Agent goes to a stdlib logger under
`durable_agent` (`get_logger`), so the handlers of the process it runs in (a team's JSON formatter, OTel's
`LoggingHandler`, pytest's caplog) see it. structlog binds the fields and renders the line; the record carries
each field as an attribute (`record.prompt_id`, ...) and the message says them too (`prompt started
prompt_id=p-1 ...`), for a plain `%(message)s` formatter. Never log secrets or full payloads.

Importing the library configures nothing: a process that sets up no logging sees our warnings through Python's
last-resort handler and nothing else. `configure_logging` (a stderr handler rendering JSON lines, or key-value
lines on a terminal) is for our own CLI's processes only.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from durable_agent.agent import otel

LIBRARY_LOGGER = "durable_agent"  # the parent of every logger of ours: a team sets its level and handlers here
EVENT_ATTRIBUTE = "event"  # the bare event ("prompt started") on each record, without the fields
RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

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


def _text(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    return json.dumps(text) if not text or any(c.isspace() or c in '"=' for c in text) else text


def to_stdlib(_logger: object, _method: str, event: structlog.typing.EventDict) -> tuple[tuple[str], dict[str, Any]]:
    """The stdlib call for structlog's event: the message with its fields, each field also a record attribute
    (renamed `name_` where it would clobber one of LogRecord's own)."""
    options = {key: event.pop(key) for key in ("exc_info", "stack_info") if key in event}
    text = str(event.pop("event", ""))
    if args := event.pop("positional_args", None):
        text = text % args
    fields = {(key if key not in RECORD_ATTRIBUTES else f"{key}_"): value for key, value in event.items()}
    message = " ".join([text, *(f"{key}={_text(value)}" for key, value in fields.items())])
    return (message,), {"extra": {EVENT_ATTRIBUTE: text, **fields}, **options}


_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,  # nothing is built for a line the logger's level drops
    structlog.contextvars.merge_contextvars,
    add_trace_ids,
    to_stdlib,
]


def logger_name(name: str) -> str:
    """Every logger of ours sits under `durable_agent` (`dagent.mcp` -> `durable_agent.mcp`)."""
    if name == LIBRARY_LOGGER or name.startswith(LIBRARY_LOGGER + "."):
        return name
    return f"{LIBRARY_LOGGER}.{name.removeprefix('dagent.')}"


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger (`.bind(...)`, `.info("event", key=value)`) writing to the stdlib logger `name`,
    whatever structlog's global configuration is (a team's own structlog setup is left alone)."""
    return structlog.stdlib.BoundLogger(logging.getLogger(logger_name(name)), _PROCESSORS, {})


# --- our CLI's processes only ------------------------------------------------------------------------


class RenderedFormatter(logging.Formatter):
    """Renders any record (ours, Temporal's, a library's) through a structlog renderer: the event, its fields
    (the record's extra attributes), level, logger and an ISO timestamp."""

    def __init__(self, renderer: structlog.typing.Processor) -> None:
        super().__init__()
        self._renderer = renderer

    def format(self, record: logging.LogRecord) -> str:
        fields = {key: value for key, value in record.__dict__.items() if key not in RECORD_ATTRIBUTES}
        event = fields.pop(EVENT_ATTRIBUTE, None) or record.getMessage()
        line: dict[str, Any] = {"event": event, **fields, "level": record.levelname.lower(), "logger": record.name,
                                "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return str(self._renderer(None, record.levelname.lower(), line))


class _CliHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure_logging` installs (and replaces when called again)."""


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    """Our CLI's logging (`dagent worker`, `dagent api`, ...): one stderr handler on the root logger, JSON lines
    (off a terminal, or `json=True`) or key-value lines; our loggers and Temporal's at `level`, every other
    library's at WARNING or above. A library user's process is never configured: this is called only by our
    own commands."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    as_json = (not _stderr_is_a_terminal()) if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(default=str) if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    handler = _CliHandler(sys.stderr)
    handler.setFormatter(RenderedFormatter(renderer))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _CliHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    for name in (LIBRARY_LOGGER, "temporalio"):
        logging.getLogger(name).setLevel(numeric)
