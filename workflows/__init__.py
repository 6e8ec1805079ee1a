"""Temporal workflows of Durable Agent."""

from workflows.conversation import ConversationWorkflow
from workflows.prompt import PromptWorkflow

WORKFLOWS: list[type] = [PromptWorkflow, ConversationWorkflow]

__all__ = ["WORKFLOWS", "ConversationWorkflow", "PromptWorkflow"]
