"""How each workflow type moves between worker builds under Temporal Worker Versioning (docs/operations.md).

Only versioned workers (DAGENT_DEPLOYMENT_NAME + DAGENT_BUILD_ID) use these: the server refuses a versioning
behavior from an unversioned worker, so `PromptWorkflow` and `ConversationWorkflow` declare none, and a
versioned worker registers the subclasses below in their place (same workflow names, same code; see
`versioned_workflows`). The behaviors and why:

- Prompts are PINNED: a prompt finishes on the build it started on. A prompt can wait a week for an
  approval; pinned, it resumes on the code that recorded its history, so a deploy never replays it on new
  code (no nondeterminism risk, no `workflow.patched` needed for it), and the old build keeps serving it
  until it is drained. Its sub-agents (child prompts on the same queue) inherit the parent's build.
- Conversations are AUTO_UPGRADE: a conversation lives for months and continues-as-new regularly; its own
  code is a small loop over child prompts. It moves to the current build at its next workflow task, so its
  changes still need `workflow.patched` (tests/test_replay.py keeps guarding them), and each prompt it starts
  is pinned to the build current at that moment.
- Budget ledgers are AUTO_UPGRADE for the same reason: one per principal, for ever, continuing as new.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import Conversation, Prompt
    from durable_agent.agent.period_budgets import LedgerView
    from durable_agent.workflows import names
    from durable_agent.workflows.budget_ledger import BudgetLedgerWorkflow
    from durable_agent.workflows.conversation import ConversationWorkflow
    from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES
    from durable_agent.workflows.inputs import raw_payloads
    from durable_agent.workflows.prompt import PromptWorkflow

PROMPT_VERSIONING = VersioningBehavior.PINNED
CONVERSATION_VERSIONING = VersioningBehavior.AUTO_UPGRADE


@workflow.defn(name=names.PROMPT_WORKFLOW, failure_exception_types=WORKFLOW_FAILURE_TYPES,
               versioning_behavior=PROMPT_VERSIONING)
class PinnedPromptWorkflow(PromptWorkflow):
    """`PromptWorkflow` on a versioned worker: pinned to the build it started on."""

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Prompt:
        return await super().run(*payloads)


@workflow.defn(name=names.CONVERSATION_WORKFLOW, failure_exception_types=WORKFLOW_FAILURE_TYPES,
               versioning_behavior=CONVERSATION_VERSIONING)
class AutoUpgradeConversationWorkflow(ConversationWorkflow):
    """`ConversationWorkflow` on a versioned worker: moves to the current build at its next task."""

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Conversation:
        return await super().run(*payloads)


@workflow.defn(name=names.BUDGET_LEDGER_WORKFLOW, versioning_behavior=CONVERSATION_VERSIONING)
class AutoUpgradeBudgetLedgerWorkflow(BudgetLedgerWorkflow):
    """`BudgetLedgerWorkflow` on a versioned worker: moves to the current build at its next task."""

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> LedgerView:
        return await super().run(*payloads)


VERSIONED: dict[type, type] = {PromptWorkflow: PinnedPromptWorkflow,
                               ConversationWorkflow: AutoUpgradeConversationWorkflow,
                               BudgetLedgerWorkflow: AutoUpgradeBudgetLedgerWorkflow}


def versioned_workflows(workflows: Sequence[type]) -> list[type]:
    """`workflows` with each of ours replaced by its versioned subclass (a versioned worker's registrations),
    each once (a plugin applied by client and worker both adds ours twice)."""
    out: list[type] = []
    for cls in workflows:
        chosen = VERSIONED.get(cls, cls)
        if chosen not in out:
            out.append(chosen)
    return out


__all__ = ["CONVERSATION_VERSIONING", "PROMPT_VERSIONING", "VERSIONED", "AutoUpgradeBudgetLedgerWorkflow",
           "AutoUpgradeConversationWorkflow",
           "PinnedPromptWorkflow", "versioned_workflows"]
