"""How each workflow type moves between worker builds under Temporal Worker Versioning (docs/operations.md).

Prompts are PINNED, conversations and budget ledgers AUTO_UPGRADE (why: that page). Only versioned workers
(DAGENT_DEPLOYMENT_NAME + DAGENT_BUILD_ID) use these: the server refuses a versioning behavior from an
unversioned worker, so `PromptWorkflow` and `ConversationWorkflow` declare none, and a versioned worker
registers the subclasses below in their place (same workflow names, same code; see `versioned_workflows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import Conversation, Prompt
    from durable_agent.agent.period_budgets import LedgerView
    from durable_agent.workflows import names
    from durable_agent.workflows.budget.ledger import BudgetLedgerWorkflow
    from durable_agent.workflows.conversation import ConversationWorkflow
    from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES
    from durable_agent.workflows.inputs import raw_payloads
    from durable_agent.workflows.prompt.workflow import PromptWorkflow

PROMPT_VERSIONING = VersioningBehavior.PINNED
CONVERSATION_VERSIONING = VersioningBehavior.AUTO_UPGRADE


WorkflowT = TypeVar("WorkflowT", bound=type)


def _on_versioned_workers(base: WorkflowT, name: str, result: type, behavior: VersioningBehavior, *,
                          class_name: str, doc: str,
                          failure_exception_types: Sequence[type[BaseException]] = ()) -> WorkflowT:
    """`base` registered as workflow `name` with a versioning behavior. Temporal reads `@workflow.run` from the
    registered class itself, and the sandbox finds that class by its module and name, so each is a module-level
    subclass that declares `run` again."""

    async def run(self, *payloads: object) -> object:
        return await base.run(self, *payloads)

    run.__annotations__["return"] = result
    run.__name__, run.__qualname__ = "run", f"{class_name}.run"
    namespace = {"run": workflow.run(raw_payloads(run)), "__doc__": doc, "__module__": __name__,
                 "__qualname__": class_name}
    versioned = type(class_name, (base,), namespace)
    return workflow.defn(name=name, versioning_behavior=behavior,
                         failure_exception_types=failure_exception_types)(versioned)


PinnedPromptWorkflow = _on_versioned_workers(
    PromptWorkflow, names.PROMPT_WORKFLOW, Prompt, PROMPT_VERSIONING, class_name="PinnedPromptWorkflow",
    doc="`PromptWorkflow` on a versioned worker: pinned to the build it started on.",
    failure_exception_types=WORKFLOW_FAILURE_TYPES)
AutoUpgradeConversationWorkflow = _on_versioned_workers(
    ConversationWorkflow, names.CONVERSATION_WORKFLOW, Conversation, CONVERSATION_VERSIONING,
    class_name="AutoUpgradeConversationWorkflow",
    doc="`ConversationWorkflow` on a versioned worker: moves to the current build at its next task.",
    failure_exception_types=WORKFLOW_FAILURE_TYPES)
AutoUpgradeBudgetLedgerWorkflow = _on_versioned_workers(
    BudgetLedgerWorkflow, names.BUDGET_LEDGER_WORKFLOW, LedgerView, CONVERSATION_VERSIONING,
    class_name="AutoUpgradeBudgetLedgerWorkflow",
    doc="`BudgetLedgerWorkflow` on a versioned worker: moves to the current build at its next task.")


VERSIONED: dict[type, type] = {PromptWorkflow: PinnedPromptWorkflow,
                               ConversationWorkflow: AutoUpgradeConversationWorkflow,
                               BudgetLedgerWorkflow: AutoUpgradeBudgetLedgerWorkflow}


def versioned_workflows(workflows: Sequence[type]) -> list[type]:
    """`workflows` with each of ours replaced by its versioned subclass (a versioned worker's registrations),
    each once (a plugin applied by client and worker both adds ours twice)."""
    return list(dict.fromkeys(VERSIONED.get(cls, cls) for cls in workflows))


__all__ = ["CONVERSATION_VERSIONING", "PROMPT_VERSIONING", "VERSIONED", "AutoUpgradeBudgetLedgerWorkflow",
           "AutoUpgradeConversationWorkflow",
           "PinnedPromptWorkflow", "versioned_workflows"]
