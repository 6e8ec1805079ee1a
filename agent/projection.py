"""Projection: the full prompt record -> the neutral message list the model sees.

A lossy, pure function. `text` -> assistant; `tool` -> call + result pair; `file` -> assistant summary;
`widget` -> skipped; `data` -> assistant JSON; `reasoning` -> the provider's own item, which only that
provider's adapter sends back (the others skip it). A tool call still waiting (pending or in flight) has no
result the model could see, so it is left out entirely rather than sent half-done.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import assert_never

from pydantic import JsonValue

from durable_agent.agent.messages import (
    AssistantMessage,
    Message,
    ReasoningMessage,
    ToolCallMessage,
    ToolResultMessage,
    UserMessage,
)
from durable_agent.agent.models import (
    ApprovalRequest,
    DataOutput,
    FileOutput,
    MessageOutput,
    Prompt,
    PromptOutput,
    ReasoningOutput,
    TextOutput,
    ToolError,
    ToolOutput,
    ToolSuccess,
    WidgetOutput,
)
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL


def render_tool_output(output: JsonValue) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"))


def project_output(entry: PromptOutput) -> list[Message]:
    match entry:
        case TextOutput():
            return [AssistantMessage(text=entry.text)] if entry.text else []
        case ToolOutput():
            return _project_tool(entry)
        case FileOutput():
            return [AssistantMessage(text=f"[file {entry.name} ({entry.media_type}, {entry.size} bytes)] "
                                          f"{entry.summary}")]
        case WidgetOutput():
            return []
        case DataOutput():
            return [AssistantMessage(text=render_tool_output(entry.data))]
        case MessageOutput():
            return [UserMessage(text=entry.text if entry.role == "user" else f"[system] {entry.text}")]
        case ReasoningOutput():
            return [ReasoningMessage(provider=entry.provider, item=entry.item)] if entry.item else []
        case _:
            assert_never(entry)


def _project_tool(entry: ToolOutput) -> list[Message]:
    result = entry.result
    if result is None or isinstance(result, ApprovalRequest) or entry.tool == MORE_BUDGET_TOOL:
        return []  # a request for more budget is the framework's, not a call the model made
    call = ToolCallMessage(call_id=entry.id, tool=entry.tool, arguments=entry.input)
    match result:
        case ToolSuccess():
            content, is_error = render_tool_output(result.output), False
        case ToolError():
            content, is_error = f"Error: {result.error}", True
        case _:
            assert_never(result)
    return [call, ToolResultMessage(call_id=entry.id, tool=entry.tool, content=content, is_error=is_error)]


def project_input(text: str) -> list[Message]:
    """The user's message that started a prompt (none for a prompt without input)."""
    return [UserMessage(text=text)] if text else []


def project_prompt(prompt: Prompt) -> list[Message]:
    return project_input(prompt.input) + [message for entry in prompt.output for message in project_output(entry)]


def project_prompts(history: Iterable[Prompt], current: Prompt) -> list[Message]:
    """All earlier prompts of the conversation, then the current one, as one neutral message list."""
    return [message for prompt in [*history, current] for message in project_prompt(prompt)]
