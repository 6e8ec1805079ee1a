"""Which behaviour a run of a workflow has: by the version its input names, else by patch markers.

Every behaviour change of a workflow is guarded so that running prompts replay (README, "Changing
workflow code safely"). A `workflow.patched` marker does that for any start, but costs each new run a
marker event and a `TemporalChangeVersion` search-attribute upsert (a visibility write) per patch. A
prompt started by `AgentClient` (or by a parent workflow) names `CURRENT_VERSION` in its input instead:
the input is in history, so the choice replays with no marker at all. Inputs without a version (runs
started before versions existed, or by a client that builds the request itself) keep the markers.

When a patch's old side may be deleted (its "drain"): only when both hold.
1. No run without the patch can still be replayed: none is open (a PromptWorkflow or ConversationWorkflow started
   with a version below the patch's, or without one before the patch shipped; a prompt may wait for approval for
   days, a conversation continues as new with its version) and none closed within the namespace's retention (a
   query on a closed run, `PromptHandle.get`, replays it). Check open ones with a visibility query on the
   workflow type and start time, then wait out the retention after the last one closed.
2. Its recorded histories are retired: the files in tests/histories/ that exercise the old side (v1 and
   unversioned runs for a version-1 patch) are deleted in the same change, with their names in tests/test_replay.py.
Then delete the old side (workflows/legacy.py lists every item by patch, moved or inline) and the `has(...)`
test, so the new side runs unconditionally. While unversioned runs that recorded the patch's marker may still be
open, call `workflow.deprecate_patch(id)` in its place (Temporal's deprecation step); drop that and the
PATCH_VERSIONS entry once those runs have drained by the same rule. Never reuse a patch id.
"""

from __future__ import annotations

from temporalio import workflow

CURRENT_VERSION = 5

# The version from which each patch's behaviour is on without a marker. A new patch gets the next
# version: add it here and bump CURRENT_VERSION.
PATCH_VERSIONS: dict[str, int] = {
    "parallel-tool-calls": 1,
    "round-input-by-reference": 1,
    "given-history-stored": 1,
    "lean-rounds": 1,
    "conversation-history-by-reference": 1,
    "conversation-unguessable-prompt-ids": 2,
    # Decisions under the approval policy (docs/approvals-policy.md): corrections checked by the policy, typed
    # approvers, four-eyes, one-use run-bound tokens, authenticated sub-agent reports, run-scoped keys.
    "secure-decisions": 2,
    "finished-call-outputs": 2,  # a finished call's files, widgets and state enter the record when it finishes
    "pending-memo": 2,  # waiting calls kept in the prompt's memo (workflows/pending_memo.py)
    "decisions-on-arrival": 3,  # a decision is on its call's entry when it arrives, not when its wait resumes
    "failure-carries-record": 3,  # a failed prompt's workflow failure carries its record (PromptHandle.result)
    # Period budgets (agent/period_budgets.py): rounds reserved from and settled with the principals' ledgers, a
    # spent budget stops the prompt or asks for more; a conversation's prompts get its budgets.
    "period-budgets": 3,
    # A conversation schedules the prompts its prompts' tools asked for (`ToolContext.schedule_prompt`, a typed
    # side output in `Prompt.scheduled`) and no longer reads the triggers plugin's state.
    "conversation-scheduled-prompts": 4,
    # A round's only regular call and the next model round run in one activity (`dagent.tool_then_model`).
    "tool-then-model": 5,
}


def has(patch_id: str, version: int | None) -> bool:
    """Whether this run has the behaviour `patch_id` guards; only unversioned runs consult a marker."""
    if version is not None:
        return version >= PATCH_VERSIONS[patch_id]
    return workflow.patched(patch_id)
