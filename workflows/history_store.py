"""Moving prompt records held by value into the stored history chain (the `store_history` local activity,
whose input is not written to history), for a conversation's finished prompts and a prompt's given history."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import Prompt
    from durable_agent.workflows.activity_refs import STORE_HISTORY
    from durable_agent.workflows.protocol import HistoryRef, StoreHistoryRequest

STORE_TIMEOUT = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))  # until the store is back: nothing is lost


async def store_history(parent: HistoryRef | None, records: list[Prompt], summary: str) -> HistoryRef:
    """Append `records` to the chain after `parent`; returns the reference to the new chain."""
    return await workflow.execute_local_activity(
        STORE_HISTORY.name, StoreHistoryRequest(parent=parent, records=records), result_type=STORE_HISTORY.result_type,
        start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY, summary=summary)
