"""Temporal workflows of Durable Agent."""

from durable_agent.workflows.conversation import ConversationWorkflow
from durable_agent.workflows.prompt import PromptWorkflow

WORKFLOWS: list[type] = [PromptWorkflow, ConversationWorkflow]

__all__ = ["WORKFLOWS", "ConversationWorkflow", "PromptWorkflow"]
