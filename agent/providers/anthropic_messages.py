"""Anthropic Messages API (`client.messages.create`).

Instructions go in `system`. Tool calls are `tool_use` blocks in assistant messages, tool results are
`tool_result` blocks in user messages, and consecutive same-role messages are merged so roles alternate and
every `tool_result` sits in the user message right after the assistant message holding its `tool_use`.

`stream` sends `stream=True` and rebuilds the message from the raw events (`AnthropicStreamAccumulator`):
text deltas are forwarded as they arrive, `input_json_delta` fragments are joined and decoded once at the
end (so malformed input gives the same `arguments_error` as `complete`), and usage is taken from
`message_start` and overwritten by the cumulative counts in `message_delta`. A stream without
`message_stop` was cut short and is retryable. Thinking deltas go to `on_reasoning`.

`thinking` and `redacted_thinking` blocks come back as `ReasoningOutput`s holding the block itself (text and
signature, or the encrypted data), which `build_messages` sends back unchanged in later rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import Message

from durable_agent.agent import messages as m
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall
from durable_agent.agent.models import ReasoningOutput, Usage
from durable_agent.agent.providers.base import TextSink
from durable_agent.agent.providers.naming import ToolNameMap
from durable_agent.agent.providers.openai_responses import NO_KEY, decode_arguments
from durable_agent.agent.providers.options import forced_tool_name, with_extra
from durable_agent.agent.providers.sdk import SDKProvider
from durable_agent.agent.providers.streaming import accumulate, event_type, open_stream

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096  # when neither the tier nor the prompt sets max_output_tokens (the API requires one)


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
            case m.UserMessage():
                add("user", {"type": "text", "text": message.text})
            case m.AssistantMessage():
                add("assistant", {"type": "text", "text": message.text})
            case m.ToolCallMessage():
                add("assistant", {"type": "tool_use", "id": message.call_id,
                                  "name": names.to_provider(message.tool),
                                  "input": _tool_input(message.arguments)})
            case m.ToolResultMessage():
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id,
                                         "content": message.content}
                if message.is_error:
                    block["is_error"] = True
                add("user", block)
            case m.ReasoningMessage():
                # thinking / redacted_thinking blocks go back unchanged (the signature covers them), first in
                # their assistant message; other providers' reasoning is never sent.
                if message.provider == PROVIDER:
                    add("assistant", dict(message.item))
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
    if request.settings.caching:
        add_cache_breakpoints(kwargs)
    return with_extra(apply_settings(kwargs, request, names, default_max_tokens=max_tokens), request)


CACHE_BREAKPOINT = {"type": "ephemeral"}
_UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def add_cache_breakpoints(kwargs: dict[str, Any]) -> None:
    """Mark the stable prefix for prompt caching (at most 2 of the 4 breakpoints Anthropic allows).

    The cache prefix runs tools -> system -> messages. One breakpoint ends the instructions (or, without
    any, the tool list), so they are cached across prompts; one ends the last message, so the next round of
    the same prompt reads every earlier round from the cache (Anthropic looks back up to 20 blocks from a
    breakpoint for the longest cached prefix). Prefixes shorter than the model's minimum are simply not
    cached.
    """
    if "system" in kwargs:
        kwargs["system"] = [{"type": "text", "text": kwargs["system"], "cache_control": CACHE_BREAKPOINT}]
    elif kwargs.get("tools"):
        kwargs["tools"][-1] = {**kwargs["tools"][-1], "cache_control": CACHE_BREAKPOINT}
    messages = kwargs.get("messages") or []
    if messages:
        last = messages[-1]["content"]
        if last and last[-1].get("type") not in _UNCACHEABLE_BLOCKS and last[-1].get("text", "x"):
            last[-1] = {**last[-1], "cache_control": CACHE_BREAKPOINT}


def apply_settings(kwargs: dict[str, Any], request: ModelRequest, names: ToolNameMap, *,
                   default_max_tokens: int) -> dict[str, Any]:
    """Messages API fields for `request.settings`. It has no `seed`. A thinking budget turns on extended
    thinking (`thinking.type=enabled`); an effort alone turns on adaptive thinking with `output_config.effort`
    (`minimal` is sent as `low`). `temperature` / `top_p` go in the body (this SDK has no arguments for them).
    """
    settings = request.settings
    budget = settings.reasoning_budget_tokens
    if settings.max_output_tokens is not None:
        kwargs["max_tokens"] = settings.max_output_tokens
    elif budget is not None:
        kwargs["max_tokens"] = budget + default_max_tokens
    if budget is not None:
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif settings.reasoning_effort is not None:
        kwargs["thinking"] = {"type": "adaptive"}
    if settings.reasoning_effort is not None:
        kwargs["output_config"] = {"effort": "low" if settings.reasoning_effort == "minimal"
                                   else settings.reasoning_effort}
    if settings.stop is not None:
        kwargs["stop_sequences"] = settings.stop
    sampling = {key: value for key, value in (("temperature", settings.temperature), ("top_p", settings.top_p))
                if value is not None}
    if sampling:
        kwargs["extra_body"] = sampling
    if request.tools:
        forced = forced_tool_name(request, names)
        choice: dict[str, Any] = {}
        if forced is not None:
            choice = {"type": "tool", "name": forced}
        elif settings.tool_choice is not None:
            choice = {"type": {"auto": "auto", "required": "any", "none": "none"}[settings.tool_choice]}
        if settings.parallel_tool_calls is False and choice.get("type") != "none":
            choice = {"type": "auto", **choice, "disable_parallel_tool_use": True}
        if choice:
            kwargs["tool_choice"] = choice
    return kwargs


def usage_counts(usage: Any) -> dict[str, int | None]:
    """The counts of a `usage` object (a message's, or a stream's `message_start` / `message_delta`)."""
    if usage is None:
        return {}
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read": usage.cache_read_input_tokens, "cache_write": usage.cache_creation_input_tokens,
            "thinking": getattr(usage.output_tokens_details, "thinking_tokens", None)}


def usage_from(counts: Mapping[str, int | None]) -> Usage:
    """`input_tokens` counts every prompt token (uncached + cache reads + cache writes), as OpenAI does."""
    if not counts:
        return Usage(model_calls=1)
    cache_read = counts["cache_read"] or 0
    cache_write = counts["cache_write"] or 0
    return Usage(
        input_tokens=(counts["input_tokens"] or 0) + cache_read + cache_write,
        output_tokens=counts["output_tokens"] or 0,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=counts["thinking"] or 0,
        model_calls=1,
    )


def tool_call(block_id: str, name: str, raw: object, *, names: ToolNameMap) -> ModelToolCall:
    tool = names.from_provider(name)
    if isinstance(raw, str):  # a lenient server may send the input as a JSON string (or: streamed fragments)
        arguments, error = decode_arguments(raw, tool=tool)
    elif isinstance(raw, dict):
        arguments, error = raw, None
    else:
        arguments, error = None, f"arguments for tool {tool!r} must be a JSON object, got {type(raw).__name__}"
    return ModelToolCall(id=block_id, tool=tool, arguments=arguments, arguments_error=error)


def thinking_output(block_type: str, *, thinking: str, signature: str, data: str, model: str) -> ReasoningOutput:
    if block_type == "redacted_thinking":
        return ReasoningOutput(provider=PROVIDER, model=model, item={"type": "redacted_thinking", "data": data})
    return ReasoningOutput(provider=PROVIDER, model=model, summary=thinking,
                           item={"type": "thinking", "thinking": thinking, "signature": signature})


@dataclass
class _Block:
    """A content block: a message's, or one a stream builds up from its start and deltas."""

    type: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    input: object = None
    json: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""

    @classmethod
    def of(cls, block: Any) -> _Block:
        """A message's content block, or the one a stream's `content_block_start` opens (text / thinking so far)."""
        text = getattr(block, block.type, None) if block.type in ("text", "thinking") else None
        return cls(type=str(block.type), text=[text] if isinstance(text, str) and text else [],
                   id=str(getattr(block, "id", "") or ""), name=str(getattr(block, "name", "") or ""),
                   input=getattr(block, "input", None), signature=str(getattr(block, "signature", "") or ""),
                   data=str(getattr(block, "data", "") or ""))


def _response(blocks: list[_Block], *, names: ToolNameMap, model: str, response_id: str,
              usage: Usage) -> ModelResponse:
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    reasoning: list[ReasoningOutput] = []
    for block in blocks:
        if block.type in ("thinking", "redacted_thinking"):
            reasoning.append(thinking_output(block.type, thinking="".join(block.text), signature=block.signature,
                                             data=block.data, model=model))
        elif block.type == "text":
            texts.append("".join(block.text))
        elif block.type == "tool_use":
            raw = "".join(block.json) if block.json else block.input
            calls.append(tool_call(block.id, block.name, raw, names=names))
    return ModelResponse(reasoning=reasoning, text="".join(texts) or None, tool_calls=calls, usage=usage,
                         model=model, response_id=response_id)


def parse_response(response: Message, *, names: ToolNameMap) -> ModelResponse:
    return _response([_Block.of(block) for block in response.content or []], names=names,
                     model=str(response.model or ""), response_id=str(response.id or ""),
                     usage=usage_from(usage_counts(response.usage)))


@dataclass
class AnthropicStreamAccumulator:
    """Rebuilds a message from raw Messages stream events."""

    model: str = ""
    response_id: str = ""
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, int | None] = field(default_factory=dict)
    stopped: bool = False
    reasoning_deltas: list[str] = field(default_factory=list)  # thinking text since `accumulate` last looked

    def add(self, event: Any) -> str:
        """Take one event in; returns its text delta ("" if none)."""
        kind = event_type(event)
        if kind == "message_start":
            message = event.message
            self.model = str(message.model or "")
            self.response_id = str(getattr(message, "id", "") or "")
            if message.usage is not None:
                self.usage = usage_counts(message.usage)
        elif kind == "content_block_start":
            block = self.blocks[event.index] = _Block.of(event.content_block)
            if block.type == "thinking":
                self.reasoning_deltas.extend(block.text)
            elif block.text:  # a text block's first text
                return block.text[0]
        elif kind == "content_block_delta":
            block = self.blocks.get(event.index)
            delta = event.delta
            if block is None:
                return ""
            if delta.type == "text_delta" and block.type == "text" and delta.text:
                block.text.append(delta.text)
                return str(delta.text)
            if delta.type == "input_json_delta" and block.type == "tool_use":
                block.json.append(delta.partial_json or "")
            if delta.type == "thinking_delta" and block.type == "thinking" and delta.thinking:
                block.text.append(delta.thinking)
                self.reasoning_deltas.append(str(delta.thinking))
            if delta.type == "signature_delta" and block.type == "thinking":
                block.signature += delta.signature or ""
        elif kind == "message_delta":
            if event.usage is not None:  # cumulative totals: overwrite; optional ones only when present
                counts = usage_counts(event.usage)
                self.usage["output_tokens"] = counts.pop("output_tokens")
                self.usage.update({key: value for key, value in counts.items() if value is not None})
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def response(self, *, names: ToolNameMap) -> ModelResponse:
        return _response([self.blocks[index] for index in sorted(self.blocks)], names=names, model=self.model,
                         response_id=self.response_id, usage=usage_from(self.usage))


class AnthropicMessagesProvider(SDKProvider):
    """The Anthropic Messages API. SDK retries are off; errors surface as `ModelError`s."""

    name = "anthropic"

    def __init__(self, *, model: str, api_key: str | None, base_url: str | None = None,
                 timeout: float = 120.0, max_tokens: int = DEFAULT_MAX_TOKENS,
                 client: anthropic.AsyncAnthropic | Any | None = None, name: str | None = None,
                 endpoint_body: Mapping[str, Any] | None = None):
        """`client`: another client of the Anthropic SDK with the same `messages` API (e.g.
        `AsyncAnthropicVertex`), built with `max_retries=0`; `name` is then the provider's name in records.
        `endpoint_body`: fields that endpoint needs in every request body (e.g. its `anthropic_version`);
        the prompt's `extra` settings can still override them."""
        super().__init__(model=model, api_key=api_key, name=name, client=client or anthropic.AsyncAnthropic(
            api_key=api_key or NO_KEY, base_url=base_url or DEFAULT_BASE_URL, timeout=timeout, max_retries=0))
        self.max_tokens = max_tokens
        self.endpoint_body = dict(endpoint_body or {})

    def _request(self, request: ModelRequest, names: ToolNameMap) -> dict[str, Any]:
        kwargs = build_request(request, model=self.model, names=names, max_tokens=self.max_tokens)
        if self.endpoint_body:
            kwargs["extra_body"] = {**self.endpoint_body, **kwargs.get("extra_body", {})}
        return kwargs

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._request(request, names)
        return await self._complete(lambda: self._client.messages.create(**kwargs),
                                    lambda response: parse_response(response, names=names))

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._request(request, names)
        events = await open_stream(self._client.messages.create(**kwargs, stream=True), self._error)
        acc = AnthropicStreamAccumulator()
        await accumulate(events, acc, on_text, self._error, on_reasoning=on_reasoning)
        return self._finish(acc if acc.stopped else None, "message_stop", lambda ended: ended.response(names=names))
