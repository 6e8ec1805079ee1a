"""get_logger writes to stdlib loggers: the record's message says the fields, each field is an attribute (one
that would clobber LogRecord's own is renamed), exceptions travel as exc_info, the logger's level filters before
anything is built, and configure_logging's formatter renders any record as one JSON line."""

from __future__ import annotations

import io
import json
import logging

import pytest

from durable_agent.agent.logging import RenderedFormatter, get_logger, logger_name, structlog
from tests.support.logs import capture_logs


def test_fields_are_in_the_message_and_on_the_record() -> None:
    with capture_logs() as lines:
        get_logger("durable_agent.test").bind(prompt_id="p-1").info("step", name="a b", count=3, empty="")
    [line] = lines
    assert line["event"] == "step" and line["prompt_id"] == "p-1" and line["count"] == 3
    assert line["name_"] == "a b", "a field named like a LogRecord attribute is renamed, not dropped"
    assert line["logger"] == "durable_agent.test" and line["log_level"] == "info"


def test_the_message_quotes_what_a_plain_formatter_would_split() -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    ours = logging.getLogger("durable_agent.quoting")
    ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    try:
        get_logger("durable_agent.quoting").info("mcp server left out", server="files", error='no "x" here')
        get_logger("durable_agent.quoting").debug("below the level", secret="never built")
    finally:
        ours.removeHandler(handler)
        ours.setLevel(logging.NOTSET)
    [record] = records
    assert record.getMessage() == 'mcp server left out server=files error="no \\"x\\" here"'


def test_exceptions_travel_as_exc_info() -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    ours = logging.getLogger("durable_agent.failing")
    ours.addHandler(handler)
    try:
        try:
            raise ValueError("bad")
        except ValueError:
            get_logger("durable_agent.failing").exception("failed", step="divide")
    finally:
        ours.removeHandler(handler)
    [record] = records
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert record.levelno == logging.ERROR and record.step == "divide"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("given", "expected"), [
    ("dagent.mcp", "durable_agent.mcp"), ("codec_server", "durable_agent.codec_server"),
    ("durable_agent.workers.drain", "durable_agent.workers.drain"), ("durable_agent", "durable_agent"),
])
def test_every_logger_sits_under_durable_agent(given: str, expected: str) -> None:
    assert logger_name(given) == expected


def test_the_cli_formatter_renders_ours_and_foreign_records_as_json() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RenderedFormatter(structlog.processors.JSONRenderer()))
    ours, foreign = logging.getLogger("durable_agent.render"), logging.getLogger("temporalio.render")
    for logger in (ours, foreign):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        get_logger("durable_agent.render").info("prompt finished", prompt_id="p-1", state="completed")
        foreign.warning("worker %s slow", "w1", extra={"temporal_workflow": {"workflow_id": "p-1"}})
    finally:
        for logger in (ours, foreign):
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "prompt finished" and first["state"] == "completed" and first["level"] == "info"
    assert first["timestamp"].endswith("+00:00") and first["logger"] == "durable_agent.render"
    assert second["event"] == "worker w1 slow" and second["temporal_workflow"] == {"workflow_id": "p-1"}
