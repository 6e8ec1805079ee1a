"""Guard the workflow stream's publish signal, an entry point of every prompt that the contrib module owns.

`WorkflowStream` registers a typed signal handler; a raw signal with no payload, several payloads or a
batch that does not decode would fail the workflow task forever. The guard takes the payloads raw,
decodes them itself and hands only a valid batch on; anything else is reported to `on_refused`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams._types import PublishInput

from workflows.failures import describe_exception, is_workflow_bug
from workflows.inputs import raw_payloads

try:
    from temporalio.contrib.workflow_streams._stream import _PUBLISH_SIGNAL as PUBLISH_SIGNAL
except ImportError:  # pragma: no cover - a future SDK may rename it; then the guard is skipped
    PUBLISH_SIGNAL = "__temporal_workflow_stream_publish"


def guard_stream_publish(on_refused: Callable[[str], None]) -> None:
    """Call from `@workflow.init`, after constructing the `WorkflowStream`."""
    publish = workflow.get_signal_handler(PUBLISH_SIGNAL)
    if publish is None:
        return
    workflow.set_signal_handler(PUBLISH_SIGNAL, _GuardedPublish(publish, on_refused).handle)


class _GuardedPublish:
    def __init__(self, publish: Callable[[PublishInput], Any], on_refused: Callable[[str], None]) -> None:
        self._publish = publish
        self._on_refused = on_refused

    @raw_payloads
    def handle(self, *payloads: object) -> None:
        try:
            if len(payloads) != 1 or not isinstance(payloads[0], RawValue):
                raise ValueError(f"expected one PublishInput payload, got {len(payloads)}")
            batch = workflow.payload_converter().from_payload(payloads[0].payload, PublishInput)
            if not isinstance(batch, PublishInput):
                raise TypeError(f"expected a PublishInput, got {type(batch).__name__}")
            self._publish(batch)
        except Exception as exc:
            if not is_workflow_bug(exc):
                raise
            self._on_refused(f"stream publish refused: {describe_exception(exc)}")

