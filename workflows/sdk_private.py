"""Every private name of the Temporal SDK this project relies on, and nothing else: the one fence around them.

Each was checked against temporalio `CHECKED_WITH`; tests check what each one does, not how its source reads
(the stream's: tests/temporal/test_junk_payloads.py sends junk to both handlers under these names).

- The workflow stream's wire names: `WorkflowStream` registers its publish signal and poll update under names
  the contrib module keeps private; workflows/stream_guard.py re-registers both behind a guard so that a raw
  payload that does not decode is refused instead of failing the workflow task. Its poll validator is private too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.contrib.workflow_streams import PollInput, WorkflowStream

CHECKED_WITH = "1.35.0"

try:
    from temporalio.contrib.workflow_streams._stream import _POLL as STREAM_POLL_UPDATE
    from temporalio.contrib.workflow_streams._stream import _PUBLISH_SIGNAL as STREAM_PUBLISH_SIGNAL
except ImportError:  # pragma: no cover - renamed by a later SDK: the names it used on the wire in CHECKED_WITH
    STREAM_PUBLISH_SIGNAL = "__temporal_workflow_stream_publish"
    STREAM_POLL_UPDATE = "__temporal_workflow_stream_poll"


def stream_poll_validator(stream: WorkflowStream) -> Callable[[PollInput], Any] | None:
    """The stream's own check of a poll (an offset it never reached, a closed stream), when the SDK has one."""
    validate = getattr(stream, "_validate_poll", None)
    return validate if callable(validate) else None
