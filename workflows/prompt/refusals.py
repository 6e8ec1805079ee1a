"""Why a decision (approve/reject) is not taken: one shape for the update's failure, the audit and the report
to a parent prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.exceptions import ApplicationError

from durable_agent.agent.errors import RefusalKind
from durable_agent.workflows import names
from durable_agent.workflows.failures import describe_exception, is_workflow_bug
from durable_agent.workflows.prompt.host import payload_converter
from durable_agent.workflows.sdk_private import with_own_failure

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """Why a decision cannot be taken: `kind` for programs (the client's `DecisionRefused.kind`), `message`
    for people (and the audit)."""

    kind: RefusalKind
    message: str

    def error(self) -> ApplicationError:
        """The update's failure: its type names the refusal, its first detail the kind. It carries its own
        failure (a message, a type, the kind; no stack trace, no cause), which the SDK's failure converter takes
        as is: the Temporal UI shows the reason alone, never the Python frames of the workflow and the SDK."""
        error = ApplicationError(self.message, self.kind, type=names.DECISION_REFUSED_ERROR, non_retryable=True)
        if (converter := payload_converter()) is not None:  # in a workflow
            details = converter.to_payloads([self.kind])
            with_own_failure(error, Failure(message=self.message, application_failure_info=ApplicationFailureInfo(
                type=names.DECISION_REFUSED_ERROR, non_retryable=True, details=Payloads(payloads=details))))
        return error


def decision_refused(tool_call_id: str, reason: str) -> Refusal:
    return Refusal("not-allowed", f"decision on {tool_call_id!r} refused: {reason}")


def applied(step: Callable[[], T]) -> T:
    """Run an update handler's step; a refusal or a bug fails the update, never the workflow task."""
    try:
        return step()
    except ValueError as exc:
        raise Refusal("decision-refused", str(exc)).error() from None  # one cause: the refusal's own words
    except Exception as exc:
        if not is_workflow_bug(exc):
            raise
        raise ApplicationError(f"internal error: {describe_exception(exc)}", type="InternalError",
                               non_retryable=True) from exc
