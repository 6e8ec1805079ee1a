"""Recorded histories (tests/histories/*.json) must replay against the current workflow code.

A failure here means a deploy would break prompts that are running or waiting right now: guard the
change with `workflow.patched(...)` (see docs/changing-workflows.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_agent.workers.plugin import DurableAgentPlugin
from tests.support.workers import TEST_SETTINGS

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))
EXPECTED = {"prompt_completed", "prompt_waiting_for_approval", "prompt_approved_with_correction",
            "prompt_rejected", "prompt_deferred_batch", "prompt_invalid_calls", "prompt_failed",
            "prompt_steered_while_waiting", "prompt_cancelled_while_waiting", "prompt_parallel_calls",
            "prompt_batch_approvals", "conversation_continued_as_new",
            "conversation_closed", "prompt_model_fallback", "prompt_with_reasoning",
            "prompt_transcript_sent_whole", "conversation_history_by_reference", "prompt_in_conversation_by_reference",
            "prompt_lean_rounds_completed", "prompt_lean_rounds_approved",
            "prompt_sub_agent", "prompt_sub_agent_child", "prompt_sub_agent_child_waiting",
            "prompt_with_given_history", "prompt_v1_approved", "prompt_v1_parallel_calls", "prompt_v1_sub_agent",
            "prompt_v1_sub_agent_child", "prompt_v1_with_given_history", "conversation_v1_continued_as_new",
            "prompt_v1_in_conversation", "prompt_fallback_on_provider_queue",
            "prompt_v1_fast_tools", "prompt_v1_lean_payloads_approved", "prompt_v1_lean_sub_agent",
            "prompt_v1_lean_sub_agent_child", "conversation_v2_turn_id_taken",
            "prompt_v2_approved_with_policy_check", "prompt_v2_sub_agent",
            "prompt_v2_sub_agent_child",
            "prompt_v2_finished_call_outputs",
            "prompt_finished_call_outputs_marker",

            "prompt_v2_pending_memo_approved", "prompt_v2_pending_memo_batch",
            "prompt_v2_pending_memo_sub_agent", "prompt_v2_pending_memo_sub_agent_child",
            "prompt_v3_decisions_on_arrival", "prompt_decisions_on_arrival_marker",
            "prompt_v3_failed_with_record", "prompt_failed_with_record_marker", "prompt_round_result_typed_next",
            "prompt_v3_budget_stopped", "prompt_v3_more_budget_approved", "budget_ledger_v3",
            "conversation_v3_budgets", "prompt_v3_in_conversation_budget_stopped",
            "conversation_v4_scheduled_prompts", "conversation_schedule_given_to_prompts",
            "prompt_given_conversation_schedule", "prompt_v5_tool_then_model",
            "prompt_v5_model_round_left_to_workflow", "prompt_tool_then_model_marker",
            "prompt_fast_call_with_next_round"}


def test_every_interesting_path_has_a_recorded_history() -> None:
    assert EXPECTED <= {p.stem for p in HISTORIES}


def _workflow_id(path: Path) -> str:
    """The recorded workflow's own id (a sub-agent's child id is made from it), else the file's name."""
    started = json.loads(path.read_text())["events"][0].get("workflowExecutionStartedEventAttributes", {})
    return started.get("workflowId") or path.stem


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays_against_current_code(path: Path) -> None:
    history = WorkflowHistory.from_json(_workflow_id(path), path.read_text())  # noqa: ASYNC240
    replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(TEST_SETTINGS)])  # the worker's configuration
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"
