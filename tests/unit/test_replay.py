"""Recorded histories (tests/histories/*.json, written by tests/record_histories.py) must replay against the
current workflow code: no server needed, so this is the fast tier's check for every workflow change.

A failure here means a deploy would break prompts that are running or waiting right now: follow the version policy
in docs/changing-workflows.md (a patch, never an edit of a released path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings
from durable_agent.workflows import names

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))
# The worker's configuration, with the strict sandbox the tests' workers run under.
SETTINGS = Settings(payload_dir=".dagent/test-payloads", file_dir=".dagent/test-files", workflow_sandbox="strict")


def _started(path: Path) -> dict[str, object]:
    return json.loads(path.read_text())["events"][0].get("workflowExecutionStartedEventAttributes", {})


def test_every_workflow_type_has_recorded_histories() -> None:
    types = {str(_started(p).get("workflowType", {}).get("name")) for p in HISTORIES}  # type: ignore[union-attr]
    assert {names.PROMPT_WORKFLOW, names.CONVERSATION_WORKFLOW, names.BUDGET_LEDGER_WORKFLOW} <= types
    assert len(HISTORIES) >= 30, "tests/record_histories.py writes one history per path it covers"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays_against_current_code(path: Path) -> None:
    workflow_id = str(_started(path).get("workflowId") or path.stem)  # a sub-agent's child id is made from it
    history = WorkflowHistory.from_json(workflow_id, path.read_text())  # noqa: ASYNC240
    replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(SETTINGS)])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"
