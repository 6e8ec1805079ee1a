"""Every private name of the Temporal SDK this project relies on, and nothing else: the one fence around them.

Each was checked against temporalio `CHECKED_WITH`; tests check what each one does, not how its source reads
(the stream's: tests/temporal/test_junk_payloads.py sends junk to both handlers under these names).

- The workflow stream's wire names: `WorkflowStream` registers its publish signal and poll update under names
  the contrib module keeps private; workflows/stream_guard.py re-registers both behind a guard so that a raw
  payload that does not decode is refused instead of failing the workflow task. Its poll validator is private too.
- The worker core's `request_workflow_eviction` (workers/resting.py: a waiting prompt leaves the cache; no public
  call evicts one run). Checked by tests/temporal/test_resting_eviction.py.
- An activity function's registered name (workers/plugin.py: the plugin adds only the activities a worker lacks),
  and a workflow class's definition (workers/versioning.py reads its name and versioning behavior before a
  worker starts).
- An application error's own failure (workflows/prompt/refusals.py: a refused decision's update failure carries its
  message, type and kind and no Python stack, which the SDK's failure converter takes as it is). Checked by
  tests/temporal/test_role_guidance.py.
- Types only, for annotations: the payload visitor's `CommandInfo` and a workflow's `_Definition`, which the
  public `WorkflowInstance` and `WorkflowRunner` methods a wrapper overrides take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.workflow_streams import PollInput, WorkflowStream
from temporalio.exceptions import FailureError

if TYPE_CHECKING:
    from temporalio.worker import Worker
    from temporalio.worker._command_aware_visitor import CommandInfo as CommandInfo
    from temporalio.workflow import _Definition as WorkflowDefinition

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


def workflow_eviction(worker: Worker) -> Callable[[str], None] | None:
    """The worker core's `request_workflow_eviction(run_id)`; None on an SDK without it."""
    bridge: Any = getattr(worker, "_bridge_worker", None)
    request = getattr(bridge, "request_workflow_eviction", None)
    return request if callable(request) else None


def activity_name(function: Callable[..., object]) -> str:
    """The name an activity function is registered under (its `@activity.defn` name, else its own)."""
    definition = activity._Definition.from_callable(function)
    return definition.name if definition is not None and definition.name else getattr(function, "__name__", "")


def workflow_definition(workflow_class: type) -> WorkflowDefinition | None:
    """A `@workflow.defn` class's definition (name, versioning behavior, dynamic config); None for another class."""
    return workflow._Definition.from_class(workflow_class)


def with_own_failure(error: FailureError, failure: Failure) -> None:
    """`error` converted as `failure` exactly (the SDK's failure converter uses an error's own failure when it has
    one), instead of a failure built from the exception with its stack trace and cause."""
    error._failure = failure
