"""OpenAI-compatible Chat Completions (`client.chat.completions.create`).

For Ollama, vLLM, llama.cpp servers or any other base_url.

Instructions become a `system` message; an assistant text followed by tool calls becomes one assistant
message with `tool_calls`; tool results become `tool` role messages.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion

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
from agent.providers.openai_responses import DEFAULT_BASE_URL, NO_KEY, decode_arguments, encode_arguments


def build_messages(request: ModelRequest, *, names: ToolNameMap) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        last = out[-1] if out else None
        match message:
            case UserMessage():
                out.append({"role": "user", "content": message.text})
            case AssistantMessage():
                if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
                    previous = last["content"]
                    last["content"] = f"{previous}\n\n{message.text}" if previous else message.text
                else:
                    out.append({"role": "assistant", "content": message.text})
            case ToolCallMessage():
                call = {
                    "id": message.call_id,
                    "type": "function",
                    "function": {"name": names.to_provider(message.tool),
                                 "arguments": encode_arguments(message.arguments)},
                }
                if last is not None and last["role"] == "assistant":
                    last.setdefault("tool_calls", []).append(call)
                else:
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            case ToolResultMessage():
                out.append({"role": "tool", "tool_call_id": message.call_id, "content": message.content})
    return out


def build_request(request: ModelRequest, *, model: str, names: ToolNameMap) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": model, "messages": build_messages(request, names=names)}
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": names.to_provider(spec.id),
                    "description": spec.description,
                    "parameters": spec.parameters or {"type": "object", "properties": {}},
                },
            }
            for spec in request.tools
        ]
    return kwargs


def parse_usage(response: ChatCompletion) -> Usage:
    usage = response.usage
    if usage is None:
        return Usage(model_calls=1)
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cached_tokens=getattr(usage.prompt_tokens_details, "cached_tokens", None) or 0,
        reasoning_tokens=getattr(usage.completion_tokens_details, "reasoning_tokens", None) or 0,
        model_calls=1,
    )


def parse_response(response: ChatCompletion, *, names: ToolNameMap) -> ModelResponse:
    text: str | None = None
    calls: list[ModelToolCall] = []
    if response.choices:
        message = response.choices[0].message
        text = message.content or None
        for i, call in enumerate(message.tool_calls or []):
            if call.type != "function":
                continue
            tool = names.from_provider(call.function.name)
            arguments, error = decode_arguments(call.function.arguments, tool=tool)
            calls.append(ModelToolCall(id=call.id or f"call_{i}", tool=tool, arguments=arguments,
                                       arguments_error=error))
    return ModelResponse(text=text, tool_calls=calls, usage=parse_usage(response),
                         model=str(response.model or ""))


class OpenAIChatProvider:
    """Any OpenAI-compatible Chat Completions server. SDK retries are off; errors surface as `ModelError`s."""

    name = "openai-chat"

    def __init__(self, *, model: str, api_key: str | None, base_url: str | None = None,
                 timeout: float = 120.0):
        self.model = model
        self._api_key = api_key
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY, base_url=base_url or DEFAULT_BASE_URL, timeout=timeout, max_retries=0
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = build_request(request, model=self.model, names=names)
        try:
            response = await self._client.chat.completions.create(**kwargs)
            return parse_response(response, names=names)
        except Exception as exc:
            raise to_model_error(exc, provider=self.name, model=self.model, secrets=[self._api_key]) from None
