"""The Python client: start prompts and conversations, decide approvals, follow events."""

from client._client import (
    AgentClient,
    ConversationHandle,
    DecisionRefused,
    PromptHandle,
    PromptSummary,
    WaitingPrompt,
    new_prompt_id,
)

__all__ = ["AgentClient", "ConversationHandle", "DecisionRefused", "PromptHandle", "PromptSummary", "WaitingPrompt",
           "new_prompt_id"]
