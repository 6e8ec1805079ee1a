"""Workflow ids: the ones a caller may choose, and the namespaces the system keeps for the ids it derives.

One rule (docs/threat-model.md, "Workflow ids"): every workflow id the system derives lies where no caller's id
can: under a reserved prefix (`dagent-` for ours, `temporal-sys` for Temporal's), or with a random part nobody
can predict (a conversation's turns, a sub-agent's child). A caller-chosen id (a conversation id, an AG-UI
thread id, `AgentClient.start(prompt_id=...)`) is refused when it begins with a reserved prefix. A component
that reaches a derived id still checks the workflow type it finds (`IdTaken`): someone with raw Temporal
access can start anything anywhere.

Pure: no Temporal, no I/O.
"""

from __future__ import annotations

import re

# Case-insensitive: Temporal's own check and ours must never disagree about a mixed-case spelling.
RESERVED_PREFIXES = ("temporal-sys", "dagent-")
CALLER_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}"  # whole string (re.fullmatch: `$` allows a final \n)
_CALLER_ID = re.compile(CALLER_ID_PATTERN)
SCHEDULE_RUN_PREFIX = "dagent-run-"  # a schedule's runs: `dagent-run-<schedule id>-<time>` (Temporal adds the time)


class IdTaken(Exception):
    """A derived workflow id is held by a workflow of another type (a squatter): never "no budget", never a 500."""

    def __init__(self, workflow_id: str, expected: str, found: str | None) -> None:
        self.workflow_id, self.expected, self.found = workflow_id, expected, found
        super().__init__(f"id-taken: the workflow id {workflow_id!r} belongs to a {expected} but a "
                         f"{found or 'different'} workflow runs there; an operator must terminate it")


def reserved(workflow_id: str) -> bool:
    """Whether the id lies in a namespace the system keeps for ids it derives."""
    return workflow_id.lower().startswith(RESERVED_PREFIXES)


def caller_id_problem(value: str, what: str = "id") -> str | None:
    """Why a caller may not choose `value` as a workflow id (one line), or None."""
    if not _CALLER_ID.fullmatch(value):
        return (f"{what} must be 1-200 characters: letters, digits and . _ : @ - (starting with a letter or "
                "digit)")
    return reserved_problem(what, value)


def reserved_problem(what: str, workflow_id: str) -> str | None:
    """Why `workflow_id` lies in a reserved namespace (one line), or None."""
    if not reserved(workflow_id):
        return None
    return (f"{what} {workflow_id!r} begins with a reserved prefix ({', '.join(RESERVED_PREFIXES)}): those ids "
            "belong to workflows the system starts")


def schedule_run_id(schedule_id: str) -> str:
    """The workflow id a schedule's action carries; Temporal appends `-<nominal time>` for each run."""
    return SCHEDULE_RUN_PREFIX + schedule_id


__all__ = ["CALLER_ID_PATTERN", "RESERVED_PREFIXES", "SCHEDULE_RUN_PREFIX", "IdTaken", "caller_id_problem",
           "reserved", "reserved_problem", "schedule_run_id"]
