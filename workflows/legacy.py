"""The legacy fence: code that exists only so that runs started by older code replay and finish.

Nothing here is used by a run that names `CURRENT_VERSION` for a behaviour it has. Each item names the patch
(workflows/versions.py) whose drain deletes it, under the rule in that module's docstring. What could not move
here without tearing a method apart stays inline and is listed in `INLINE`, so this module is the one list of
what the next drain removes.
"""

from __future__ import annotations

from pydantic import JsonValue
from temporalio import workflow

from durable_agent.agent.models import Prompt, PromptRef
from durable_agent.workflows.protocol import PlannedCall
from durable_agent.workflows.search_attributes import prompt_search_attributes


class LegacyToolInvocation(PromptRef):
    """Patch `lean-rounds`. The tool activity's input as workflows without that patch send it: the prompt's ids,
    the whole planned call (policy fields included) and the arguments a second time. `ToolInvocation` reads it
    (its `_from_legacy` validator), so an activity scheduled by such a run still runs."""

    workflow_id: str
    call: PlannedCall
    input: JsonValue
    plugin_state: JsonValue = None


def upsert_every_search_attribute(prompt: Prompt) -> None:
    """Patch `lean-rounds`. Runs without it upsert every search attribute at each state change, changed or not."""
    workflow.upsert_search_attributes(prompt_search_attributes(prompt))


# Old sides that stay inline, by patch: where, and why they did not move. Delete each with its patch.
INLINE: dict[str, list[str]] = {
    "parallel-tool-calls": [
        "prompt.py PromptWorkflow._run_calls (the one-call-at-a-time loop) and _process_call: the round loop's "
        "other branch.",
        "approvals.py ApprovalDesk.request_and_wait: one call asks and waits alone.",
    ],
    "round-input-by-reference": [
        "round_input.py RoundInputs.next / whole / _header(lean=False): the by-value branch of one expression each.",
    ],
    "given-history-stored": [
        "round_input.py RoundInputs.store_given_history: the early return for runs without the patch.",
    ],
    "lean-rounds": [
        "tool_runner.py ToolRunner._tool_invocation: the choice between LegacyToolInvocation and the current input.",
        "host.py WorkflowHost.upsert_state: the choice between upsert_every_search_attribute and changed ones.",
        "protocol.py ToolInvocation._from_legacy: a validator of the current model, so it lives on the class.",
    ],
    "conversation-history-by-reference": [
        "conversation.py ConversationWorkflow._run_prompt: records carried by value when the patch is off.",
    ],
    "conversation-unguessable-prompt-ids": [
        "conversation.py ConversationWorkflow._new_prompt_id / _run_prompt: sequential turn ids, and a taken id "
        "fails the conversation.",
    ],
    "secure-decisions": [
        "approvals.py ApprovalDesk.secure False (unsigned decisions, workflow-scoped idempotency keys, reports from "
        "any child): read across ApprovalDesk, DecisionChecks (decision_checks.py), SubAgents and ToolRunner.",
        "activities/tool_calls.py _idempotency_key: the `<workflow id>/<call id>` key when "
        "`ToolInvocation.run_scoped` is False (the activity side of the same switch).",
    ],
    "finished-call-outputs": [
        "prompt.py PromptWorkflow._process_calls: `on_finish` False, side outputs recorded once the group ends.",
    ],
    "pending-memo": [
        "record.py Recorder.publish_pending: the early return, no memo of waiting calls.",
    ],
    "decisions-on-arrival": [
        "approvals.py ApprovalDesk._arrived: the early return (no settle on arrival), so _decision_for settles "
        "the call when its wait resumes.",
    ],
    "failure-carries-record": [
        "record.py Recorder.failure_details: the early return, a failure without the record.",
        "client/_client.py PromptHandle.result: the query of the closed workflow when its failure has no record.",
    ],
    "period-budgets": [
        "budget_gate.py BudgetGate.active: False for runs without the patch (their `budgets` are ignored).",
        "conversation.py ConversationWorkflow._budgets_for: no `budgets` on the child's request.",
    ],
    "conversation-scheduled-prompts": [
        "conversation.py ConversationWorkflow._next_due / _schedule / _fire: the triggers plugin's state "
        "(agent/triggers.py) as the schedule, read and written by the conversation.",
        "conversation.py ConversationWorkflow._schedule_to_carry: the hand-over of those triggers to the next run.",
        "agent/triggers.py and plugins/triggers.py _write_legacy: the state schema, which the plugin keeps writing "
        "so that runs without the patch still fire what its tools ask for.",
    ],
    "tool-then-model": [
        "tool_then_model.py fusable: the None for runs without the patch, so every call runs as "
        "PromptWorkflow._run_calls runs it and every model round as PromptWorkflow._call_model calls it.",
    ],
}

# Kept for old runs but tied to no patch (no workflow command depends on them); each goes when no run that used
# it can still be open or read: past retention plus the longest approval wait.
UNVERSIONED: list[str] = [
    "names.py DELTAS_TOPIC and its branches in client/_client.py (PromptHandle.live) and client/_live.py: model "
    "text that older workers published to the stream; wire names stay in names.py.",
    "workers/storage/local.py _LegacyDirectoryDriver: payloads stored by older workers in the old directory layout.",
]
