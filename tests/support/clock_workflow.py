"""A workflow that reads the wall clock: a test double of workflow code that breaks determinism (no real
workflow of ours does, so one is written to show what the sandbox stops)."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow


@workflow.defn(name="ClockWorkflow")
class ClockWorkflow:
    @workflow.run
    async def run(self) -> str:
        return datetime.now().isoformat()
