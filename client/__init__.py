"""The Python client: start prompts and conversations, decide approvals, follow events."""

from client._client import AgentClient, ConversationHandle, DecisionRefused, PromptHandle, WaitingPrompt, new_prompt_id
from client._live import PromptNotFound

__all__ = ["AgentClient", "ConversationHandle", "DecisionRefused", "PromptHandle", "PromptNotFound", "WaitingPrompt",
           "new_prompt_id"]
