"""Refused signals recorded in a workflow's audit list (bounded) and its log, never raised."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import AuditEntry

MAX_AUDIT_ENTRIES = 200  # beyond this, refused signals are only logged: junk cannot grow a record forever
MAX_AUDIT_DETAIL_CHARS = 500


def record_ignored(audit: list[AuditEntry], kind: str, problem: str, *, who: str = "") -> None:
    detail = problem[:MAX_AUDIT_DETAIL_CHARS]
    workflow.logger.warning("%signored %s signal: %s", f"{who} " if who else "", kind, detail)
    if len(audit) < MAX_AUDIT_ENTRIES:
        audit.append(AuditEntry(at=workflow.now(), kind=f"ignored_{kind}", detail=detail))
