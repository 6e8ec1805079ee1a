"""Why a decision (approve/reject) is not taken: one shape for the update's failure, the audit and the report
to a parent prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from temporalio.exceptions import ApplicationError

from durable_agent.agent.errors import RefusalKind
from durable_agent.workflows import names
from durable_agent.workflows.failures import describe_exception, is_workflow_bug

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """Why a decision cannot be taken: `kind` for programs (the client's `DecisionRefused.kind`), `message`
    for people (and the audit)."""

    kind: RefusalKind
    message: str

    def error(self) -> ApplicationError:
        """The update's failure: its type names the refusal, its first detail the kind."""
        return ApplicationError(self.message, self.kind, type=names.DECISION_REFUSED_ERROR, non_retryable=True)


def decision_refused(tool_call_id: str, reason: str) -> Refusal:
    return Refusal("not-allowed", f"decision on {tool_call_id!r} refused: {reason}")


def applied(step: Callable[[], T]) -> T:
    """Run an update handler's step; a refusal or a bug fails the update, never the workflow task."""
    try:
        return step()
    except ValueError as exc:
        raise Refusal("decision-refused", str(exc)).error() from exc
    except Exception as exc:
        if not is_workflow_bug(exc):
            raise
        raise ApplicationError(f"internal error: {describe_exception(exc)}", type="InternalError",
                               non_retryable=True) from exc
