"""The Python client: start prompts and conversations, decide approvals, follow events."""

from durable_agent.agent.errors import DecisionRefused
from durable_agent.agent.models import PromptRef
from durable_agent.client._client import AgentClient, PromptSummary, new_prompt_id, prompt_query
from durable_agent.client._live import PromptNotFound
from durable_agent.client.handles import ConversationHandle, PromptHandle
from durable_agent.client.pending import PendingList
from durable_agent.client.stuck import TaskProblem
from durable_agent.workflows.wire.decisions import PendingApproval

__all__ = ["AgentClient", "ConversationHandle", "DecisionRefused", "PendingApproval", "PendingList", "PromptHandle",
           "PromptNotFound", "PromptRef", "PromptSummary", "TaskProblem", "new_prompt_id", "prompt_query"]
