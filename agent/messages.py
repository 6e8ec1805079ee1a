"""The neutral message list every provider adapter starts from, and the model call's request/response."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Annotated, Literal

from pydantic import Field, JsonValue

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import ReasoningOutput, Usage
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)


class _Message(_Model):
    @cached_property
    def chars(self) -> int:
        """The characters this message adds to a request, what token estimates count. Counted once: a message
        is not changed after it is built, and a long conversation sends the same earlier messages every round."""
        return self._count_chars()

    def _count_chars(self) -> int:
        raise NotImplementedError


class UserMessage(_Message):
    kind: Literal["user"] = "user"
    text: str

    def _count_chars(self) -> int:
        return len(self.text)


class AssistantMessage(_Message):
    kind: Literal["assistant"] = "assistant"
    text: str

    def _count_chars(self) -> int:
        return len(self.text)


class ToolCallMessage(_Message):
    """The model asked for a tool. `tool` is our tool id (dots allowed); adapters map it to a legal name."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    tool: str
    arguments: JsonValue

    def _count_chars(self) -> int:
        return len(self.tool) + len(json.dumps(self.arguments, ensure_ascii=False))


class ToolResultMessage(_Message):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    content: str
    is_error: bool = False

    def _count_chars(self) -> int:
        return len(self.tool) + len(self.content)


class ReasoningMessage(_Message):
    """A provider's reasoning item from an earlier round. Only that provider's adapter sends it back."""

    kind: Literal["reasoning"] = "reasoning"
    provider: str
    item: dict[str, JsonValue]

    def _count_chars(self) -> int:
        return len(json.dumps(self.item, ensure_ascii=False))


Message = Annotated[
    UserMessage | AssistantMessage | ToolCallMessage | ToolResultMessage | ReasoningMessage,
    Field(discriminator="kind"),
]


class ToolSpec(_Model):
    """What the model is told about a tool."""

    id: str
    description: str
    parameters: dict[str, JsonValue]


class ModelRequest(_Model):
    """One model call: instructions (system), messages, tools. Provider-neutral."""

    instructions: str = ""
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    round: int = 1
    prompt_id: str = ""
    settings: ModelSettings = Field(default_factory=ModelSettings)
    cache_key: str = Field(default="", description="Groups requests sharing a prefix (OpenAI prompt_cache_key).")

    def forced_tool(self) -> str | None:
        """The tool id `settings.tool_choice` forces, or None for auto / required / none."""
        choice = self.settings.tool_choice
        return None if choice is None or choice in ("auto", "required", "none") else choice


class ModelToolCall(_Model):
    """A tool call in a model response. `arguments_error` is set when the arguments were not valid JSON."""

    id: str
    tool: str
    arguments: JsonValue = None
    arguments_error: str | None = None


class ModelResponse(_Model):
    reasoning: list[ReasoningOutput] = Field(default_factory=list)
    text: str | None = None
    tool_calls: list[ModelToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    response_id: str = Field(default="", exclude_if=lambda v: not v,
                             description="The provider's id of the response (gen_ai.response.id on the span).")
