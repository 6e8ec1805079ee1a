"""Temporal workflows of Durable Agent.

Importing a module of this package (its names, its wire models) does not load the workflow classes: a client
needs only the names and models, and a worker asks for `WORKFLOWS` (or a class) here, which loads them then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent.workflows.budget.ledger import BudgetLedgerWorkflow
    from durable_agent.workflows.conversation import ConversationWorkflow
    from durable_agent.workflows.prompt.workflow import PromptWorkflow

    WORKFLOWS: list[type]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from durable_agent.workflows.budget.ledger import BudgetLedgerWorkflow
    from durable_agent.workflows.conversation import ConversationWorkflow
    from durable_agent.workflows.prompt.workflow import PromptWorkflow

    loaded = {"PromptWorkflow": PromptWorkflow, "ConversationWorkflow": ConversationWorkflow,
              "BudgetLedgerWorkflow": BudgetLedgerWorkflow,
              "WORKFLOWS": [PromptWorkflow, ConversationWorkflow, BudgetLedgerWorkflow]}
    globals().update(loaded)
    return loaded[name]


__all__ = ["WORKFLOWS", "BudgetLedgerWorkflow", "ConversationWorkflow", "PromptWorkflow"]
