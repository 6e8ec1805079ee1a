"""Temporal workflows of Durable Agent."""

from workflows.prompt import PromptWorkflow

WORKFLOWS: list[type] = [PromptWorkflow]

__all__ = ["WORKFLOWS", "PromptWorkflow"]
