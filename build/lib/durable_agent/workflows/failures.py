"""Which exceptions in workflow code fail the workflow (visibly, with the reason) instead of its task.

By default the SDK fails only the *workflow task* for an unexpected exception and retries it forever: the
prompt sits in Running and nothing sent to it helps. Our workflows catch their own bugs where they can
(recording the reason in the record) and declare these types as workflow failures for anything that still
escapes, e.g. a start whose payloads the SDK itself cannot decode.

`NondeterminismError` (and the sandbox's `RestrictedWorkflowAccessError`) are deliberately *not* here: after
a bad deploy the task keeps retrying, so rolling the code back lets the prompt continue instead of losing it.
"""

from __future__ import annotations

from temporalio import workflow

WORKFLOW_FAILURE_TYPES: list[type[BaseException]] = [
    ArithmeticError, AssertionError, AttributeError, LookupError, NameError, RuntimeError, TypeError, ValueError,
]
MAX_DESCRIPTION_CHARS = 1000


def is_workflow_bug(exc: BaseException) -> bool:
    """True for an exception our workflow code should turn into a visible failure or refusal."""
    return isinstance(exc, Exception) and not isinstance(exc, workflow.NondeterminismError)


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_DESCRIPTION_CHARS]
