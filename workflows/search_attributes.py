"""Search attributes that let the Temporal UI and `dagent pending` filter prompts."""

from __future__ import annotations

from temporalio.common import SearchAttributeUpdate, TypedSearchAttributes

from durable_agent.agent.models import Prompt
from durable_agent.workflows.names import (
    CONVERSATION_ID,
    PARENT_PROMPT_ID,
    PROMPT_STATE,
    SEARCH_ATTRIBUTE_KEYS,
    USER_ID,
)

#: Every custom search attribute our workflows set (name -> Temporal type, as `temporal operator
#: search-attribute create --type` and `start-dev --search-attribute` spell it): the dev server registers them,
#: a worker checks them at start (workers/search_attributes.py), deploy/temporal-setup.sh creates them.
SEARCH_ATTRIBUTE_TYPES: dict[str, str] = {  # KEYWORD_LIST -> KeywordList
    key.name: key.indexed_value_type.name.title().replace("_", "") for key in SEARCH_ATTRIBUTE_KEYS}


def changed_search_attributes(prompt: Prompt, current: TypedSearchAttributes) -> list[SearchAttributeUpdate]:
    """The prompt's search attributes whose value differs from `current` (what the workflow was started
    with, plus its upserts so far): an upsert is an event in history, so one that changes nothing is waste."""
    updates = [PROMPT_STATE.value_set(prompt.state), USER_ID.value_set(prompt.user_id)]
    if prompt.conversation_id:
        updates.append(CONVERSATION_ID.value_set(prompt.conversation_id))
    if prompt.parent_prompt_id:  # a sub-agent's prompt
        updates.append(PARENT_PROMPT_ID.value_set(prompt.parent_prompt_id))
    return [update for update in updates if current.get(update.key) != update.value]
