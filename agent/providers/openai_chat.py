"""OpenAI-compatible Chat Completions (`client.chat.completions.create`).

For Ollama, vLLM, llama.cpp servers or any other base_url.

Instructions become a `system` message; an assistant text followed by tool calls becomes one assistant
message with `tool_calls`; tool results become `tool` role messages.

`stream` asks for `stream=True` with `stream_options.include_usage`, forwards content deltas, and gathers
tool-call fragments by their `index` (`ChatStreamAccumulator`). Servers that send no usage chunk give the same
`Usage(model_calls=1)` a non-streamed reply without usage gives. Reasoning that local servers send beside the
content (`reasoning_content` / `reasoning`) is kept as a `ReasoningOutput` to show the user (streamed to
`on_reasoning`), never sent back. A stream that ends without a
`finish_reason` was cut short and is retryable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from durable_agent.agent import messages as m
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall
from durable_agent.agent.models import ReasoningOutput
from durable_agent.agent.providers.base import TextSink
from durable_agent.agent.providers.naming import ToolNameMap
from durable_agent.agent.providers.openai_responses import (
    OpenAISDKProvider,
    decode_arguments,
    encode_arguments,
    parse_usage,
)
from durable_agent.agent.providers.options import forced_tool_name, with_extra
from durable_agent.agent.providers.streaming import accumulate, open_stream


def build_messages(request: ModelRequest, *, names: ToolNameMap) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        last = out[-1] if out else None
        match message:
            case m.UserMessage():
                out.append({"role": "user", "content": message.text})
            case m.AssistantMessage():
                if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
                    previous = last["content"]
                    last["content"] = f"{previous}\n\n{message.text}" if previous else message.text
                else:
                    out.append({"role": "assistant", "content": message.text})
            case m.ToolCallMessage():
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
            case m.ToolResultMessage():
                out.append({"role": "tool", "tool_call_id": message.call_id, "content": message.content})
            case m.ReasoningMessage():
                pass  # Chat Completions takes no reasoning items back: reasoning is skipped here
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
    return with_extra(apply_settings(kwargs, request, names), request)


def apply_settings(kwargs: dict[str, Any], request: ModelRequest, names: ToolNameMap) -> dict[str, Any]:
    """Chat Completions fields for `request.settings`. Prompt caching is automatic on api.openai.com, and
    `prompt_cache_key` is not sent: local OpenAI-compatible servers may reject fields they do not know."""
    settings = request.settings
    for key, value in (("temperature", settings.temperature), ("top_p", settings.top_p),
                         ("max_completion_tokens", settings.max_output_tokens), ("stop", settings.stop),
                         ("seed", settings.seed), ("reasoning_effort", settings.reasoning_effort)):
        if value is not None:
            kwargs[key] = value
    if request.tools:
        if settings.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = settings.parallel_tool_calls
        forced = forced_tool_name(request, names)
        if forced is not None:
            kwargs["tool_choice"] = {"type": "function", "function": {"name": forced}}
        elif settings.tool_choice is not None:
            kwargs["tool_choice"] = settings.tool_choice
    return kwargs


PROVIDER = "openai-chat"
CHAT_USAGE = ("prompt", "completion")


def reasoning_text(message: object) -> str:
    """The reasoning a local server puts beside the content (`reasoning_content`: vLLM, DeepSeek;
    `reasoning`: Ollama, newer vLLM); "" when there is none."""
    for key in ("reasoning_content", "reasoning"):
        value = getattr(message, key, None)
        if isinstance(value, str) and value:
            return value
    return ""


def shown_reasoning(text: str, model: str) -> list[ReasoningOutput]:
    """Reasoning to show the user. Its `item` stays empty: these servers take no reasoning back."""
    return [ReasoningOutput(provider=PROVIDER, model=model, summary=text)] if text else []


def parse_response(response: ChatCompletion, *, names: ToolNameMap) -> ModelResponse:
    text: str | None = None
    calls: list[ModelToolCall] = []
    reasoning: list[ReasoningOutput] = []
    if response.choices:
        message = response.choices[0].message
        text = message.content or None
        reasoning = shown_reasoning(reasoning_text(message), str(response.model or ""))
        calls = [tool_call(i, call.id, call.function.name, call.function.arguments, names=names)
                 for i, call in enumerate(message.tool_calls or []) if call.type == "function"]
    return ModelResponse(reasoning=reasoning, text=text, tool_calls=calls,
                         usage=parse_usage(response.usage, CHAT_USAGE), model=str(response.model or ""),
                         response_id=str(response.id or ""))


def tool_call(position: int, call_id: str | None, name: str, arguments: object, *,
              names: ToolNameMap) -> ModelToolCall:
    tool = names.from_provider(name)
    parsed, error = decode_arguments(arguments, tool=tool)
    return ModelToolCall(id=call_id or f"call_{position}", tool=tool, arguments=parsed, arguments_error=error)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ChatStreamAccumulator:
    """Rebuilds one choice (index 0) of a streamed chat completion from its chunks."""

    model: str = ""
    response_id: str = ""
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: CompletionUsage | None = None
    finish_reason: str | None = None
    reasoning: list[str] = field(default_factory=list)
    reasoning_deltas: list[str] = field(default_factory=list)  # since `accumulate` last looked

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk in; returns its text delta ("" if none)."""
        if chunk.model and not self.model:
            self.model = str(chunk.model)
        if chunk.id and not self.response_id:
            self.response_id = str(chunk.id)
        if chunk.usage is not None:  # the last one wins (some servers repeat running totals)
            self.usage = chunk.usage
        delta_text = ""
        for choice in chunk.choices or []:
            if (choice.index or 0) != 0:
                continue
            if choice.finish_reason:
                self.finish_reason = str(choice.finish_reason)
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                delta_text += delta.content
            if thought := reasoning_text(delta):
                self.reasoning.append(thought)
                self.reasoning_deltas.append(thought)
            for fragment in delta.tool_calls or []:
                self._add_call_fragment(fragment)
        if delta_text:
            self.text.append(delta_text)
        return delta_text

    def _add_call_fragment(self, fragment: Any) -> None:
        index = fragment.index
        if index is None:  # lenient servers: a new id starts a new call, anything else continues the last
            is_new = bool(fragment.id) and all(call.id != fragment.id for call in self.calls.values())
            index = len(self.calls) if is_new or not self.calls else max(self.calls)
        call = self.calls.setdefault(index, _PartialCall())
        if fragment.id and not call.id:
            call.id = fragment.id
        function = fragment.function
        if function is None:
            return
        if function.name and function.name != call.name:
            call.name = function.name if not call.name else call.name + function.name
        if function.arguments:
            call.arguments.append(function.arguments)

    def response(self, *, names: ToolNameMap) -> ModelResponse:
        calls = [tool_call(i, call.id, call.name, "".join(call.arguments), names=names)
                 for i, call in enumerate(self.calls[index] for index in sorted(self.calls))]
        return ModelResponse(reasoning=shown_reasoning("".join(self.reasoning), self.model),
                             text="".join(self.text) or None, tool_calls=calls,
                             usage=parse_usage(self.usage, CHAT_USAGE), model=self.model, response_id=self.response_id)


class OpenAIChatProvider(OpenAISDKProvider):
    """Any OpenAI-compatible Chat Completions server. SDK retries are off; errors surface as `ModelError`s."""

    name = "openai-chat"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._sent(build_request(request, model=self.model, names=names), self._client.chat.completions.create,
                            emptied=("messages",))
        return await self._complete(lambda: self._client.chat.completions.create(**kwargs),
                                    lambda response: parse_response(response, names=names))

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._sent(build_request(request, model=self.model, names=names), self._client.chat.completions.create,
                            emptied=("messages",))
        call = self._client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        chunks = await open_stream(call, self._error)
        acc = ChatStreamAccumulator()
        await accumulate(chunks, acc, on_text, self._error, on_reasoning=on_reasoning)
        return self._finish(acc if acc.finish_reason is not None else None, "a finish_reason",
                            lambda ended: ended.response(names=names))
