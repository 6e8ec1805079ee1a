"""Anthropic Messages API (`client.messages.create`).

Instructions go in `system`. Tool calls are `tool_use` blocks in assistant messages, tool results are
`tool_result` blocks in user messages, and consecutive same-role messages are merged so roles alternate and
every `tool_result` sits in the user message right after the assistant message holding its `tool_use`.
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message

from agent.messages import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ToolCallMessage,
    ToolResultMessage,
    UserMessage,
)
from agent.models import Usage
from agent.providers.errors import to_model_error
from agent.providers.naming import ToolNameMap
from agent.providers.openai_responses import NO_KEY, decode_arguments

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096


def _tool_input(arguments: object) -> dict[str, Any]:
    """`tool_use.input` must be an object; anything else (e.g. unparseable arguments) is wrapped."""
    if isinstance(arguments, dict):
        return arguments
    return {} if arguments is None else {"value": arguments}


def build_messages(request: ModelRequest, *, names: ToolNameMap) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for message in request.messages:
        match message:
            case UserMessage():
                add("user", {"type": "text", "text": message.text})
            case AssistantMessage():
                add("assistant", {"type": "text", "text": message.text})
            case ToolCallMessage():
                add("assistant", {"type": "tool_use", "id": message.call_id,
                                  "name": names.to_provider(message.tool),
                                  "input": _tool_input(message.arguments)})
            case ToolResultMessage():
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id,
                                         "content": message.content}
                if message.is_error:
                    block["is_error"] = True
                add("user", block)
    return out


def build_request(request: ModelRequest, *, model: str, names: ToolNameMap,
                  max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                              "messages": build_messages(request, names=names)}
    if request.instructions:
        kwargs["system"] = request.instructions
    if request.tools:
        kwargs["tools"] = [
            {
                "name": names.to_provider(spec.id),
                "description": spec.description,
                "input_schema": spec.parameters or {"type": "object", "properties": {}},
            }
            for spec in request.tools
        ]
    return kwargs


def parse_usage(response: Message) -> Usage:
    """`input_tokens` counts every prompt token (uncached + cache reads + cache writes), as OpenAI does."""
    usage = response.usage
    if usage is None:
        return Usage(model_calls=1)
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
        output_tokens=usage.output_tokens or 0,
        cached_tokens=cache_read,
        reasoning_tokens=getattr(usage.output_tokens_details, "thinking_tokens", None) or 0,
        model_calls=1,
    )


def parse_response(response: Message, *, names: ToolNameMap) -> ModelResponse:
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in response.content or []:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            tool = names.from_provider(block.name)
            raw: object = block.input
            if isinstance(raw, str):  # a lenient server may send the input as a JSON string
                arguments, error = decode_arguments(raw, tool=tool)
            elif isinstance(raw, dict):
                arguments, error = raw, None
            else:
                arguments, error = None, (f"arguments for tool {tool!r} must be a JSON object, "
                                          f"got {type(raw).__name__}")
            calls.append(ModelToolCall(id=block.id, tool=tool, arguments=arguments, arguments_error=error))
    text = "".join(texts)
    return ModelResponse(text=text or None, tool_calls=calls, usage=parse_usage(response),
                         model=str(response.model or ""))


class AnthropicMessagesProvider:
    """The Anthropic Messages API. SDK retries are off; errors surface as `ModelError`s."""

    name = "anthropic"

    def __init__(self, *, model: str, api_key: str | None, base_url: str | None = None,
                 timeout: float = 120.0, max_tokens: int = DEFAULT_MAX_TOKENS):
        self.model = model
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or NO_KEY, base_url=base_url or DEFAULT_BASE_URL, timeout=timeout, max_retries=0
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = build_request(request, model=self.model, names=names, max_tokens=self.max_tokens)
        try:
            response = await self._client.messages.create(**kwargs)
            return parse_response(response, names=names)
        except Exception as exc:
            raise to_model_error(exc, provider=self.name, model=self.model, secrets=[self._api_key]) from None
