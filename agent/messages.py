"""The neutral message list every provider adapter starts from, and the model call's request/response."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent.model_settings import ModelSettings
from agent.models import ReasoningOutput, Usage


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserMessage(_Model):
    kind: Literal["user"] = "user"
    text: str


class AssistantMessage(_Model):
    kind: Literal["assistant"] = "assistant"
    text: str


class ToolCallMessage(_Model):
    """The model asked for a tool. `tool` is our tool id (dots allowed); adapters map it to a legal name."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    tool: str
    arguments: JsonValue


class ToolResultMessage(_Model):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    content: str
    is_error: bool = False


class ReasoningMessage(_Model):
    """A provider's reasoning item from an earlier round. Only that provider's adapter sends it back."""

    kind: Literal["reasoning"] = "reasoning"
    provider: str
    item: dict[str, JsonValue]


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
