"""Which exceptions in workflow code fail the workflow (visibly, with the reason) instead of its task.

By default the SDK fails only the *workflow task* for an unexpected exception and retries it forever: the
prompt sits in Running and nothing sent to it helps. Our workflows catch their own bugs where they can
(recording the reason in the record) and declare these types as workflow failures for anything that still
escapes, e.g. a start whose payloads the SDK itself cannot decode.

`NondeterminismError` (and the sandbox's `RestrictedWorkflowAccessError`) are deliberately *not* here: after
a bad deploy the task keeps retrying, so rolling the code back lets the prompt continue instead of losing it.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError

from durable_agent.workflows import names

WORKFLOW_FAILURE_TYPES: list[type[BaseException]] = [
    ArithmeticError, AssertionError, AttributeError, LookupError, NameError, RuntimeError, TypeError, ValueError,
]
MAX_DESCRIPTION_CHARS = 1000


def is_workflow_bug(exc: BaseException) -> bool:
    """True for an exception our workflow code should turn into a visible failure or refusal."""
    return isinstance(exc, Exception) and not isinstance(exc, workflow.NondeterminismError)


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_DESCRIPTION_CHARS]


def is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError | CancelledError) or (
        isinstance(exc, ActivityError | ChildWorkflowError) and isinstance(exc.cause, CancelledError))


def failure_reason(exc: BaseException) -> str:
    """What went wrong, in words: an activity's or a child's own failure rather than its wrapper."""
    cause = exc.cause if isinstance(exc, ActivityError | ChildWorkflowError) and exc.cause is not None else exc
    return getattr(cause, "message", None) or str(cause) or type(cause).__name__


def fallback_target(exc: ActivityError) -> tuple[int, str] | None:
    """(position, spec) of the next model when the round failed over to a fallback, else None."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type != names.MODEL_FALLBACK_ERROR:
        return None
    details = list(cause.details)
    if len(details) < 2 or not isinstance(details[0], int):
        return None
    return details[0], str(details[1])


def transcript_missing(exc: ActivityError) -> bool:
    """The worker that ran the round lacked part of its input (no query fills the gap: the workflow resends)."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == names.TRANSCRIPT_MISSING_ERROR
