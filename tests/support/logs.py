"""`capture_logs()`: the lines of Durable Agent's stdlib loggers while the block runs, each as a dict (`event`,
`log_level`, `logger` and the bound fields), from a handler on the `durable_agent` logger."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from durable_agent.agent.logging import EVENT_ATTRIBUTE, LIBRARY_LOGGER, RECORD_ATTRIBUTES


class _Lines(logging.Handler):
    def __init__(self, lines: list[dict[str, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        fields = {key: value for key, value in record.__dict__.items() if key not in RECORD_ATTRIBUTES}
        self.lines.append({**fields, "event": fields.get(EVENT_ATTRIBUTE, record.getMessage()),
                           "log_level": record.levelname.lower(), "logger": record.name})


@contextmanager
def capture_logs(level: int = logging.DEBUG) -> Iterator[list[dict[str, Any]]]:
    lines: list[dict[str, Any]] = []
    ours = logging.getLogger(LIBRARY_LOGGER)
    handler, previous = _Lines(lines), ours.level
    ours.addHandler(handler)
    ours.setLevel(level)
    try:
        yield lines
    finally:
        ours.removeHandler(handler)
        ours.setLevel(previous)
