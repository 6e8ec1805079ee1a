"""Temporal workflows of Durable Agent."""

from durable_agent.workflows.budget_ledger import BudgetLedgerWorkflow
from durable_agent.workflows.conversation import ConversationWorkflow
from durable_agent.workflows.prompt import PromptWorkflow

WORKFLOWS: list[type] = [PromptWorkflow, ConversationWorkflow, BudgetLedgerWorkflow]

__all__ = ["WORKFLOWS", "BudgetLedgerWorkflow", "ConversationWorkflow", "PromptWorkflow"]
