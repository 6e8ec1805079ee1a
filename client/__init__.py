"""The Python client: start prompts and conversations, decide approvals, follow events."""

from durable_agent.agent.errors import DecisionRefused
from durable_agent.client._client import AgentClient, PromptSummary, WaitingPrompt, new_prompt_id, prompt_query
from durable_agent.client._live import PromptNotFound
from durable_agent.client.handles import ConversationHandle, PromptHandle
from durable_agent.client.pending import PendingList, PendingRow
from durable_agent.client.stuck import TaskProblem

__all__ = ["AgentClient", "ConversationHandle", "DecisionRefused", "PendingList", "PendingRow", "PromptHandle",
           "PromptNotFound", "PromptSummary", "TaskProblem", "WaitingPrompt", "new_prompt_id", "prompt_query"]
