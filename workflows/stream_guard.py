"""Guard the workflow stream's publish signal and poll update, entry points of every prompt that the contrib
module owns.

`WorkflowStream` registers a typed signal handler; a raw signal with no payload, several payloads or a
batch that does not decode would fail the workflow task forever. The guard takes the payloads raw,
decodes them itself and hands only a valid batch on; anything else is reported to `on_refused`.

Its poll update is guarded the same way: the validator refuses, with the reason, a payload that is not one
`PollInput` with an integer offset and string topics, instead of letting the handler trip over it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import PollInput, PollResult, PublishInput, WorkflowStream

from durable_agent.workflows.failures import describe_exception, is_workflow_bug
from durable_agent.workflows.inputs import raw_payloads
from durable_agent.workflows.sdk_private import STREAM_POLL_UPDATE as POLL_UPDATE
from durable_agent.workflows.sdk_private import STREAM_PUBLISH_SIGNAL as PUBLISH_SIGNAL
from durable_agent.workflows.sdk_private import stream_poll_validator


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



def guard_stream_poll(stream: WorkflowStream) -> None:
    """Call from `@workflow.init`, after constructing `stream`."""
    poll = workflow.get_update_handler(POLL_UPDATE)
    if poll is None:
        return
    guarded = _GuardedPoll(poll, stream_poll_validator(stream))
    workflow.set_update_handler(POLL_UPDATE, guarded.handle, validator=guarded.validate)


class _GuardedPoll:
    def __init__(self, poll: Callable[[PollInput], Any], validate: Callable[[PollInput], None] | None) -> None:
        self._poll = poll
        self._validate = validate

    @staticmethod
    def _decode(payloads: tuple[object, ...]) -> PollInput:
        if len(payloads) != 1 or not isinstance(payloads[0], RawValue):
            raise ValueError(f"expected one PollInput payload, got {len(payloads)}")
        try:
            request = workflow.payload_converter().from_payload(payloads[0].payload, PollInput)
        except Exception as exc:  # any payload at all may arrive here: every failure is a refusal
            raise ValueError(f"not a valid PollInput ({describe_exception(exc)})") from None
        if not isinstance(request, PollInput) or not isinstance(request.from_offset, int) \
                or not isinstance(request.topics, list) or not all(isinstance(t, str) for t in request.topics):
            raise ValueError("not a valid PollInput")
        return request

    @raw_payloads
    def validate(self, *payloads: object) -> None:
        request = self._decode(payloads)
        if self._validate is not None:
            self._validate(request)

    @raw_payloads
    async def handle(self, *payloads: object) -> PollResult:
        result: PollResult = await self._poll(self._decode(payloads))
        return result
