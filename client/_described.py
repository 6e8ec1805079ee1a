"""A workflow's description, or None when the server has no workflow by that id (describe is not billed)."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode


async def described(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription | None:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
