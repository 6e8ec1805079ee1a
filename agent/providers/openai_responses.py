"""OpenAI Responses API (`client.responses.create`).

`build_request` and `parse_response` are pure and unit-testable; `OpenAIResponsesProvider` only adds the
SDK call and error mapping. Requests are stateless (`store=False`): the full history is sent every time.

Reasoning items come back as `ReasoningOutput`s (their summary for the user, the item itself to send back
in later rounds: with `store=False` it is only accepted with its `encrypted_content`, which settings with a
reasoning effort or summary ask for via `include`).

`stream` sends the same request with `stream=True`, forwards `response.output_text.delta` (and refusal)
deltas and reasoning summary deltas (to `on_reasoning`), and parses the final response carried by
`response.completed` (or `response.incomplete`) with `parse_response`, so it returns exactly what `complete`
would.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import openai
from openai.types.responses import Response

from durable_agent.agent import messages as m
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall
from durable_agent.agent.models import ReasoningOutput, Usage
from durable_agent.agent.providers.base import ModelError, TextSink
from durable_agent.agent.providers.errors import stream_error
from durable_agent.agent.providers.naming import ToolNameMap
from durable_agent.agent.providers.options import forced_tool_name, with_extra
from durable_agent.agent.providers.sdk import SDKProvider, observed, sent_as_given
from durable_agent.agent.providers.streaming import event_type, guarded_events, open_stream

PROVIDER = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "not-needed"


def encode_arguments(arguments: object) -> str:
    return json.dumps({} if arguments is None else arguments, ensure_ascii=False, separators=(",", ":"))


def decode_arguments(raw: object, *, tool: str) -> tuple[Any, str | None]:
    """(arguments, None) for a JSON object string, or (None, reason) when the model sent something else."""
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return None, f"arguments for tool {tool!r} were not a JSON string (got {type(raw).__name__})"
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"arguments for tool {tool!r} are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, f"arguments for tool {tool!r} must be a JSON object, got {type(value).__name__}"
    return value, None


def build_request(request: ModelRequest, *, model: str, names: ToolNameMap) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for message in request.messages:
        match message:
            case m.UserMessage():
                items.append({"role": "user", "content": message.text})
            case m.AssistantMessage():
                items.append({"role": "assistant", "content": message.text})
            case m.ToolCallMessage():
                items.append({
                    "type": "function_call",
                    "call_id": message.call_id,
                    "name": names.to_provider(message.tool),
                    "arguments": encode_arguments(message.arguments),
                })
            case m.ToolResultMessage():
                items.append({"type": "function_call_output", "call_id": message.call_id,
                              "output": message.content})
            case m.ReasoningMessage():
                # Without server-side storage (store=False) only an item carrying its encrypted content can be
                # sent back; other providers' reasoning is never sent.
                if message.provider == PROVIDER and message.item.get("encrypted_content"):
                    items.append(dict(message.item))
    kwargs: dict[str, Any] = {"model": model, "input": items, "store": False}
    if request.instructions:
        kwargs["instructions"] = request.instructions
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "name": names.to_provider(spec.id),
                "description": spec.description,
                "parameters": spec.parameters or {"type": "object", "properties": {}},
                "strict": False,
            }
            for spec in request.tools
        ]
    return with_extra(apply_settings(kwargs, request, names), request)


def apply_settings(kwargs: dict[str, Any], request: ModelRequest, names: ToolNameMap) -> dict[str, Any]:
    """Responses API fields for `request.settings` (it has no `stop` or `seed`: those are left out)."""
    settings = request.settings
    for key, value in (("temperature", settings.temperature), ("top_p", settings.top_p),
                         ("max_output_tokens", settings.max_output_tokens)):
        if value is not None:
            kwargs[key] = value
    reasoning: dict[str, Any] = {}
    if settings.reasoning_effort:
        reasoning["effort"] = settings.reasoning_effort
    if settings.reasoning_summary:
        reasoning["summary"] = settings.reasoning_summary
    if reasoning:
        kwargs["reasoning"] = reasoning
        # store=False keeps nothing server-side: the reasoning comes back encrypted so it can be sent again.
        kwargs["include"] = ["reasoning.encrypted_content"]
    if request.tools:
        if settings.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = settings.parallel_tool_calls
        forced = forced_tool_name(request, names)
        if forced is not None:
            kwargs["tool_choice"] = {"type": "function", "name": forced}
        elif settings.tool_choice is not None:
            kwargs["tool_choice"] = settings.tool_choice
    if settings.caching and request.cache_key:
        kwargs["prompt_cache_key"] = request.cache_key
    return kwargs


def parse_usage(usage: Any, sides: tuple[str, str] = ("input", "output")) -> Usage:
    """An OpenAI usage object's counts: `input_tokens`, `output_tokens` and their `_details` (Responses), or with
    `sides=("prompt", "completion")` the Chat Completions names."""
    if usage is None:
        return Usage(model_calls=1)
    inputs, outputs = sides
    return Usage(
        input_tokens=getattr(usage, f"{inputs}_tokens") or 0,
        output_tokens=getattr(usage, f"{outputs}_tokens") or 0,
        cached_tokens=getattr(getattr(usage, f"{inputs}_tokens_details", None), "cached_tokens", None) or 0,
        reasoning_tokens=getattr(getattr(usage, f"{outputs}_tokens_details", None), "reasoning_tokens", None) or 0,
        model_calls=1,
    )


def reasoning_output(item: Any, model: str) -> ReasoningOutput:
    """A `reasoning` output item, kept as the input item the Responses API takes back."""
    summary = [{"type": "summary_text", "text": part.text} for part in item.summary or []]
    kept: dict[str, Any] = {"type": "reasoning", "id": item.id, "summary": summary}
    if item.content:
        kept["content"] = [{"type": "reasoning_text", "text": part.text} for part in item.content]
    if item.encrypted_content:
        kept["encrypted_content"] = item.encrypted_content
    return ReasoningOutput(provider=PROVIDER, model=model, item=kept,
                           summary="\n\n".join(part["text"] for part in summary))


def parse_response(response: Response, *, names: ToolNameMap) -> ModelResponse:
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    reasoning: list[ReasoningOutput] = []
    for item in response.output or []:
        if item.type == "reasoning":
            reasoning.append(reasoning_output(item, str(response.model or "")))
        elif item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    texts.append(part.text)
                elif part.type == "refusal":
                    texts.append(part.refusal)
        elif item.type == "function_call":
            tool = names.from_provider(item.name)
            arguments, error = decode_arguments(item.arguments, tool=tool)
            calls.append(ModelToolCall(id=item.call_id, tool=tool, arguments=arguments,
                                       arguments_error=error))
    text = "".join(texts)
    return ModelResponse(reasoning=reasoning, text=text or None, tool_calls=calls, usage=parse_usage(response.usage),
                         model=str(response.model or ""), response_id=str(response.id or ""))


class OpenAISDKProvider(SDKProvider):
    """A provider on the OpenAI SDK's client."""

    def __init__(self, *, model: str, api_key: str | None, base_url: str | None = None,
                 timeout: float = 120.0, client: openai.AsyncOpenAI | None = None, name: str | None = None):
        """`client`: another OpenAI SDK client (e.g. `AsyncAzureOpenAI`), built with `max_retries=0`; `name` is
        then the provider's name in records."""
        super().__init__(model=model, api_key=api_key, name=name, client=client or openai.AsyncOpenAI(
            api_key=api_key or NO_KEY, base_url=base_url or DEFAULT_BASE_URL, timeout=timeout, max_retries=0))
        self._given_client = client is not None

    def _sent(self, kwargs: dict[str, Any], create: object, *, emptied: tuple[str, ...] = ()) -> dict[str, Any]:
        """The call's keyword arguments, with the body in `extra_body` (`sdk.sent_as_given`) unless someone else may
        read the typed ones: a client the user built, or an SDK method an instrumentation wraps."""
        if self._given_client or observed(create, self._client.post, self._client.request):
            return kwargs
        return sent_as_given(kwargs, emptied=emptied)


class OpenAIResponsesProvider(OpenAISDKProvider):
    """The OpenAI Responses API. SDK retries are off; errors surface as `ModelError`s."""

    name = "openai"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._sent(build_request(request, model=self.model, names=names), self._client.responses.create)
        return await self._complete(lambda: self._client.responses.create(**kwargs),
                                    lambda response: parse_response(response, names=names))

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse:
        names = ToolNameMap.for_request(request)
        kwargs = self._sent(build_request(request, model=self.model, names=names), self._client.responses.create)
        events = await open_stream(self._client.responses.create(**kwargs, stream=True), self._error)
        final: Response | None = None
        async with contextlib.aclosing(guarded_events(events, self._error)) as stream:
            async for event in stream:
                kind = event_type(event)
                if kind in ("response.output_text.delta", "response.refusal.delta"):
                    delta = getattr(event, "delta", None)
                    if isinstance(delta, str) and delta:
                        await on_text(delta)
                elif kind == "response.reasoning_summary_text.delta" and on_reasoning is not None:
                    delta = getattr(event, "delta", None)
                    if isinstance(delta, str) and delta:
                        await on_reasoning(delta)
                elif kind == "response.reasoning_summary_part.added" and on_reasoning is not None:
                    if (getattr(event, "summary_index", 0) or 0) > 0:  # parts join with a blank line
                        await on_reasoning("\n\n")
                elif kind in ("response.completed", "response.incomplete"):
                    final = getattr(event, "response", None)
                elif kind == "response.failed":
                    raise self._failed(getattr(event, "response", None))
                elif kind == "error":
                    raise stream_error([getattr(event, "code", None)], str(getattr(event, "message", "") or ""),
                                       provider=self.name, model=self.model, secrets=[self._api_key])
        return self._finish(final, "response.completed", lambda response: parse_response(response, names=names))

    def _failed(self, response: object) -> ModelError:
        error = getattr(response, "error", None)
        code = getattr(error, "code", None)
        message = getattr(error, "message", None)
        return stream_error([str(code) if code else None], f"response failed: {message or 'no details'}",
                            provider=self.name, model=self.model, secrets=[self._api_key])
