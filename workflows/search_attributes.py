"""Search attributes that let the Temporal UI and `dagent pending` filter prompts."""

from __future__ import annotations

from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeUpdate, TypedSearchAttributes

from durable_agent.agent.models import Prompt
from durable_agent.workflows.names import (
    CONVERSATION_ID,
    PARENT_PROMPT_ID,
    PROMPT_STATE,
    SEARCH_ATTRIBUTE_KEYS,
    USER_ID,
)

_TYPE_NAMES = {SearchAttributeIndexedValueType.KEYWORD: "Keyword", SearchAttributeIndexedValueType.TEXT: "Text",
               SearchAttributeIndexedValueType.INT: "Int", SearchAttributeIndexedValueType.BOOL: "Bool",
               SearchAttributeIndexedValueType.DOUBLE: "Double", SearchAttributeIndexedValueType.DATETIME: "Datetime",
               SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList"}

#: Every custom search attribute our workflows set (name -> Temporal type, as `temporal operator
#: search-attribute create --type` and `start-dev --search-attribute` spell it): the dev server registers them,
#: a worker checks them at start (workers/search_attributes.py), deploy/temporal-setup.sh creates them.
SEARCH_ATTRIBUTE_TYPES: dict[str, str] = {key.name: _TYPE_NAMES[key.indexed_value_type]
                                          for key in SEARCH_ATTRIBUTE_KEYS}


def prompt_search_attributes(prompt: Prompt) -> list[SearchAttributeUpdate]:
    updates = [PROMPT_STATE.value_set(prompt.state), USER_ID.value_set(prompt.user_id)]
    if prompt.conversation_id:
        updates.append(CONVERSATION_ID.value_set(prompt.conversation_id))
    if prompt.parent_prompt_id:  # a sub-agent's prompt
        updates.append(PARENT_PROMPT_ID.value_set(prompt.parent_prompt_id))
    return updates


def changed_search_attributes(prompt: Prompt, current: TypedSearchAttributes) -> list[SearchAttributeUpdate]:
    """The prompt's search attributes whose value differs from `current` (what the workflow was started
    with, plus its upserts so far): an upsert is an event in history, so one that changes nothing is waste."""
    return [update for update in prompt_search_attributes(prompt) if current.get(update.key) != update.value]
