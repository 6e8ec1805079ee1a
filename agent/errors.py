"""The error hierarchy of Durable Agent: every error this project raises on purpose is a `DurableAgentError`.

Code that handles failures matches these classes (or, across the wire, their names as `ApplicationError`
types, which `workflows/names.py` keeps stable), never the text of a message.
"""

from __future__ import annotations


class DurableAgentError(Exception):
    """The root. Raised in workflow code, any of these fails the workflow (never retries its task forever)."""


class PromptFailedError(DurableAgentError):
    """The prompt cannot finish: a tool that must not fail failed, or the final answer kept missing its schema."""
