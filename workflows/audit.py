"""Refused signals recorded in a workflow's audit list (bounded) and its log, never raised."""

from __future__ import annotations

import logging
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import AuditEntry

MAX_AUDIT_ENTRIES = 200  # beyond this, refused signals are only logged: junk cannot grow a record forever
MAX_AUDIT_DETAIL_CHARS = 500


def record_ignored(audit: list[AuditEntry], kind: str, problem: str, *, who: str = "", at: datetime | None = None,
                   logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None) -> None:
    """`at` and `logger`: the workflow's clock and log unless given (by a room's host, workflows/prompt/host.py)."""
    detail = problem[:MAX_AUDIT_DETAIL_CHARS]
    (logger or workflow.logger).warning("%signored %s signal: %s", f"{who} " if who else "", kind, detail)
    if len(audit) < MAX_AUDIT_ENTRIES:
        audit.append(AuditEntry(at=at or workflow.now(), kind=f"ignored_{kind}", detail=detail))
