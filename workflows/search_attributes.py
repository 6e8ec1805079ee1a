"""Search attributes that let the Temporal UI and `dagent pending` filter prompts."""

from __future__ import annotations

from temporalio.common import SearchAttributeUpdate

from agent.models import Prompt
from workflows.names import CONVERSATION_ID, PARENT_PROMPT_ID, PROMPT_STATE, USER_ID


def prompt_search_attributes(prompt: Prompt) -> list[SearchAttributeUpdate]:
    updates = [PROMPT_STATE.value_set(prompt.state), USER_ID.value_set(prompt.user_id)]
    if prompt.conversation_id:
        updates.append(CONVERSATION_ID.value_set(prompt.conversation_id))
    if prompt.parent_prompt_id:  # a sub-agent's prompt
        updates.append(PARENT_PROMPT_ID.value_set(prompt.parent_prompt_id))
    return updates
