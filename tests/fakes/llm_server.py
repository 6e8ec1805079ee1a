"""A local fake LLM server speaking three wire protocols over real HTTP.

OpenAI Responses (`POST /v1/responses`), OpenAI Chat Completions (`POST /v1/chat/completions`) and Anthropic
Messages (`POST /v1/messages`), served by pytest-httpserver, and the same protocols at Azure's, Vertex AI's and
Amazon Bedrock's URLs. Replies are queued per protocol and served in
order; every JSON request body (and its headers) is recorded so tests can assert what the SDK sent. A
request with nothing queued gets a 418 whose message says so, which the providers map to a fatal error.

A request with `"stream": true` gets the same queued reply as real server-sent events in its protocol's wire
format (`responses_events` / `chat_events` / `anthropic_events`): text in word-sized deltas, tool-call
arguments in small fragments, usage where the protocol puts it. Error replies stay plain JSON with their
status, as real servers answer before a stream starts. `SSEOptions` can cut a stream off (a dropped
connection or a clean but early end), pause it until the test says go, or leave out the chat usage chunk.

Bedrock (`/model/<id>/invoke`, `/model/<id>/invoke-with-response-stream`) serves the Anthropic queue: the
stream comes as AWS event-stream frames (tests/fakes/eventstream.py), and a request is answered only if it
is signed for `FakeLLMServer.bedrock_auth` (SigV4, checked with botocore, or a Bedrock API key) - anything
else gets Bedrock's 403 and takes no reply from the queue.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from tests.fakes import eventstream
from tests.fakes.sigv4 import AWSCredentials, sigv4_problem

WireProtocol = Literal["responses", "chat", "anthropic"]
PROTOCOLS: tuple[WireProtocol, ...] = ("responses", "chat", "anthropic")
PATHS: dict[WireProtocol, str] = {
    "responses": "/v1/responses",
    "chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
}
FAKE_MODEL = "fake-model"
# The same protocols behind other clouds' URLs: Azure OpenAI (`AsyncAzureOpenAI`) and Vertex AI
# (`AsyncAnthropicVertex`, whose streamed replies are the same server-sent events).
CLOUD_PATHS: dict[WireProtocol, re.Pattern[str]] = {
    "responses": re.compile(r"^/openai(/v1|/deployments/[^/]+)?/responses$"),
    "chat": re.compile(r"^/openai/deployments/[^/]+/chat/completions$"),
    "anthropic": re.compile(r"^/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/[^/:]+"
                            r":(raw|streamRaw)Predict$"),
}
# Amazon Bedrock (`AsyncAnthropicBedrock`): the model id (which may hold colons) in the path, no `model` in
# the body, streams as AWS event-stream frames.
BEDROCK_PATH = re.compile(r"^/model/[^/]+/invoke(-with-response-stream)?$")
BEDROCK_STREAM_SUFFIX = "/invoke-with-response-stream"


@dataclass(frozen=True)
class FakeUsage:
    """Token counts as the wire protocol reports them (Anthropic's `input_tokens` excludes cache reads)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0  # Anthropic's cache_creation_input_tokens (the other protocols report none)
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class FakeCall:
    """A tool call to send. `arguments` as a str is sent verbatim (so it can be malformed JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class SSEOptions:
    """How to stream a reply when the request asks for `stream: true`.

    `cut_after`: send only this many SSE events, then end the stream - `cut="reset"` drops the connection
    mid-body (the client sees an incomplete chunked body), `cut="eof"` ends the body cleanly but without the
    protocol's final events, `cut="error"` sends the protocol's in-stream error event (type / code
    `error_type`; on Bedrock an exception frame of that type, e.g. `throttlingException`) and then ends the
    body. `pause_after` / `resume`: after that many events, wait (up to `pause_timeout` seconds) until the
    test sets `resume`; whether it was set in time is appended to `FakeLLMServer.pauses`.
    `usage=False`: a chat server that ignores `stream_options.include_usage`.
    """

    cut_after: int | None = None
    cut: Literal["reset", "eof", "error"] = "reset"
    error_type: str = "overloaded_error"
    pause_after: int | None = None
    resume: threading.Event | None = None
    pause_timeout: float = 5.0
    usage: bool = True


@dataclass(frozen=True)
class _Reply:
    status: int
    body: Any
    headers: Mapping[str, str]
    sse: SSEOptions = field(default_factory=SSEOptions)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any
    at: float = 0.0  # time.monotonic() when it arrived
    rate_limited: bool = False  # answered 429 by `FakeLLMServer.rate_limit`
    auth_problem: str | None = None  # Bedrock: why its signature (or API key) was refused, answered 403


# --- response bodies per protocol ---------------------------------------------------------------


def _arguments_json(call: FakeCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))


def responses_body(
    text: str | None, calls: Sequence[FakeCall], usage: FakeUsage, model: str
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({
            "type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    for i, call in enumerate(calls):
        output.append({
            "type": "function_call", "id": f"fc_{i}", "call_id": call.id or f"call_{i}", "name": call.name,
            "arguments": _arguments_json(call), "status": "completed",
        })
    return {
        "id": "resp_fake", "object": "response", "created_at": 0, "model": model, "status": "completed",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


def chat_body(text: str | None, calls: Sequence[FakeCall], usage: FakeUsage, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": call.id or f"call_{i}", "type": "function",
             "function": {"name": call.name, "arguments": _arguments_json(call)}}
            for i, call in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        },
    }


def anthropic_body(
    text: str | None, calls: Sequence[FakeCall], usage: FakeUsage, model: str
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(calls):
        arguments = call.arguments if isinstance(call.arguments, str) else dict(call.arguments)
        content.append(
            {"type": "tool_use", "id": call.id or f"toolu_{i}", "name": call.name, "input": arguments}
        )
    return {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cached_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "output_tokens_details": {"thinking_tokens": usage.reasoning_tokens},
        },
    }


_BODIES = {"responses": responses_body, "chat": chat_body, "anthropic": anthropic_body}

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
}


def with_reasoning(protocol: WireProtocol, body: dict[str, Any], *, summary: str, secret: str,
                   redacted: bool = False) -> dict[str, Any]:
    """`body` with one reasoning item first: an OpenAI `reasoning` item (summary + `encrypted_content`) or an
    Anthropic `thinking` block (text + `signature`), or a `redacted_thinking` block (`data`)."""
    if protocol == "responses":
        item = {"type": "reasoning", "id": "rs_fake", "summary": [{"type": "summary_text", "text": summary}],
                "encrypted_content": secret}
        return {**body, "output": [item, *body["output"]]}
    if protocol == "anthropic":
        block = ({"type": "redacted_thinking", "data": secret} if redacted
                 else {"type": "thinking", "thinking": summary, "signature": secret})
        return {**body, "content": [block, *body["content"]]}
    raise ValueError("Chat Completions has no reasoning items")


def error_body(protocol: WireProtocol, status: int, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "param": None, "code": None}}


# --- streamed replies (server-sent events) per protocol -------------------------------------------

_WORDS = re.compile(r"\s*\S+\s*|\s+")
ARGUMENT_FRAGMENT = 5


def text_pieces(text: str) -> list[str]:
    """The text deltas a stream sends: word by word, each keeping its trailing whitespace."""
    return _WORDS.findall(text)


def argument_fragments(arguments: str) -> list[str]:
    """Tool-call arguments in small fragments, so clients must join them."""
    return [arguments[i:i + ARGUMENT_FRAGMENT] for i in range(0, len(arguments), ARGUMENT_FRAGMENT)]


def _sse(event: str | None, data: Any) -> str:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n"


def responses_events(body: Mapping[str, Any]) -> list[str]:
    """`POST /v1/responses` with `stream: true`: the Responses API's typed events, ending in `response.completed`
    (or `response.incomplete` / `response.failed`, after the body's `status`) carrying `body` itself."""
    sequence = itertools.count()
    events: list[str] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(_sse(kind, {"type": kind, "sequence_number": next(sequence), **fields}))

    pending = {**body, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for out_index, item in enumerate(body.get("output") or []):
        if item.get("type") == "message":
            emit("response.output_item.added", output_index=out_index,
                 item={**item, "status": "in_progress", "content": []})
            for part_index, part in enumerate(item.get("content") or []):
                where = {"item_id": item["id"], "output_index": out_index, "content_index": part_index}
                kind, key = ("output_text", "text") if part["type"] == "output_text" else ("refusal", "refusal")
                emit("response.content_part.added", **where, part={**part, key: ""})
                for piece in text_pieces(part[key]):
                    extra = {"logprobs": []} if kind == "output_text" else {}
                    emit(f"response.{kind}.delta", **where, delta=piece, **extra)
                extra = {"logprobs": []} if kind == "output_text" else {}
                emit(f"response.{kind}.done", **where, **{key: part[key]}, **extra)
                emit("response.content_part.done", **where, part=part)
        elif item.get("type") == "function_call":
            emit("response.output_item.added", output_index=out_index,
                 item={**item, "arguments": "", "status": "in_progress"})
            for fragment in argument_fragments(item["arguments"]):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=out_index,
                     delta=fragment)
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=out_index,
                 name=item["name"], arguments=item["arguments"])
        elif item.get("type") == "reasoning":
            emit("response.output_item.added", output_index=out_index, item={**item, "summary": []})
            for summary_index, part in enumerate(item.get("summary") or []):
                where = {"item_id": item["id"], "output_index": out_index, "summary_index": summary_index}
                emit("response.reasoning_summary_part.added", **where, part={**part, "text": ""})
                for piece in text_pieces(part["text"]):
                    emit("response.reasoning_summary_text.delta", **where, delta=piece)
                emit("response.reasoning_summary_text.done", **where, text=part["text"])
                emit("response.reasoning_summary_part.done", **where, part=part)
        else:
            emit("response.output_item.added", output_index=out_index, item=item)
        emit("response.output_item.done", output_index=out_index, item=item)
    final = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(body.get("status", ""),
                                                                                  "response.completed")
    emit(final, response=body)
    return events


def chat_events(body: Mapping[str, Any], *, include_usage: bool) -> list[str]:
    """`POST /v1/chat/completions` with `stream: true`: `chat.completion.chunk`s, tool calls by `index`, a
    last chunk with `finish_reason`, a usage chunk (empty `choices`) if asked for, then `[DONE]`."""
    base = {"id": body.get("id", "chatcmpl-fake"), "object": "chat.completion.chunk",
            "created": body.get("created", 0), "model": body.get("model", FAKE_MODEL)}
    if include_usage:
        base["usage"] = None
    events: list[str] = []

    def emit(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        events.append(_sse(None, {**base, "choices": [choice]}))

    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        emit({"role": "assistant", "content": ""})
        for piece in text_pieces(message.get("reasoning_content") or ""):
            emit({"reasoning_content": piece})
        for piece in text_pieces(message.get("content") or ""):
            emit({"content": piece})
        for i, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            emit({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                  "function": {"name": function["name"], "arguments": ""}}]})
            for fragment in argument_fragments(function["arguments"]):
                emit({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]})
        emit({}, choice.get("finish_reason") or "stop")
    if include_usage and body.get("usage") is not None:
        events.append(_sse(None, {**base, "choices": [], "usage": body["usage"]}))
    events.append(_sse(None, "[DONE]"))
    return events


def anthropic_stream(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Messages stream events for `body`: `message_start` (input usage), a `ping`, per content block
    start / deltas (`text_delta`, `input_json_delta`, `thinking_delta`) / stop, `message_delta` (stop reason,
    output usage), `message_stop`."""
    usage = dict(body.get("usage") or {})
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, **fields})

    start_usage = {key: usage.get(key) for key in
                   ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")}
    emit("message_start", message={**body, "content": [], "stop_reason": None, "stop_sequence": None,
                                   "usage": {**start_usage, "output_tokens": 1}})
    emit("ping")
    for index, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            emit("content_block_start", index=index, content_block={**block, "text": ""})
            for piece in text_pieces(block["text"]):
                emit("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        elif kind == "tool_use":
            emit("content_block_start", index=index, content_block={**block, "input": {}})
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            for fragment in argument_fragments(raw):
                emit("content_block_delta", index=index,
                     delta={"type": "input_json_delta", "partial_json": fragment})
        elif kind == "thinking":
            emit("content_block_start", index=index, content_block={**block, "thinking": "", "signature": ""})
            for piece in text_pieces(block.get("thinking", "")):
                emit("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
            emit("content_block_delta", index=index,
                 delta={"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            emit("content_block_start", index=index, content_block=block)
        emit("content_block_stop", index=index)
    delta_usage: dict[str, Any] = {"output_tokens": usage.get("output_tokens", 0)}
    if usage.get("output_tokens_details") is not None:
        delta_usage["output_tokens_details"] = usage["output_tokens_details"]
    emit("message_delta", delta={"stop_reason": body.get("stop_reason"), "stop_sequence": None},
         usage=delta_usage)
    emit("message_stop")
    return events


def anthropic_events(body: Mapping[str, Any]) -> list[str]:
    """`POST /v1/messages` with `stream: true`: `anthropic_stream(body)` as server-sent events."""
    return [_sse(event["type"], event) for event in anthropic_stream(body)]


def bedrock_frames(body: Mapping[str, Any]) -> list[bytes]:
    """`POST /model/<id>/invoke-with-response-stream`: the same events, each the base64 `bytes` of an AWS
    event-stream `chunk`; Bedrock adds its invocation metrics to `message_stop`."""
    events = anthropic_stream(body)
    usage = body.get("usage") or {}
    events[-1] = {**events[-1], "amazon-bedrock-invocationMetrics": {
        "inputTokenCount": usage.get("input_tokens", 0), "outputTokenCount": usage.get("output_tokens", 0),
        "invocationLatency": 1, "firstByteLatency": 1}}
    return [eventstream.chunk(event) for event in events]


def stream_error_event(protocol: WireProtocol, error_type: str, message: str = "fake stream error") -> str:
    """The error a server sends inside an already-started (200) stream."""
    if protocol == "responses":
        return _sse("error", {"type": "error", "code": error_type, "message": message, "param": None,
                              "sequence_number": 999})
    if protocol == "chat":
        return _sse(None, {"error": {"message": message, "type": error_type, "param": None, "code": None}})
    return _sse("error", {"type": "error", "error": {"type": error_type, "message": message}})


def sse_events(protocol: WireProtocol, body: Mapping[str, Any], *, include_usage: bool = True) -> list[str]:
    """The SSE events (each a complete `event:`/`data:` block) that stream `body` in `protocol`'s format."""
    if protocol == "responses":
        return responses_events(body)
    if protocol == "chat":
        return chat_events(body, include_usage=include_usage)
    return anthropic_events(body)


# --- the server ---------------------------------------------------------------------------------


class FakeLLMServer:
    """Queue replies with `reply_text` / `reply_tool_calls` / `reply_error`; point an SDK at `base_url`."""

    def __init__(self, server: HTTPServer | None = None):
        self.server = server or HTTPServer(host="127.0.0.1", port=0, threaded=True)
        self._lock = threading.Lock()
        self._queues: dict[WireProtocol, deque[_Reply]] = {p: deque() for p in PROTOCOLS}
        self._requests: dict[WireProtocol, list[RecordedRequest]] = {p: [] for p in PROTOCOLS}
        self.pauses: list[bool] = []  # per `SSEOptions.pause_after`: was `resume` set before the timeout?
        self._limits: dict[WireProtocol, tuple[int, float]] = {}
        self._served: dict[WireProtocol, deque[float]] = {p: deque() for p in PROTOCOLS}
        # What Bedrock requests must be signed with: AWS credentials (SigV4) or a Bedrock API key (bearer).
        self.bedrock_auth: AWSCredentials | str | None = None

    # lifecycle

    def start(self) -> FakeLLMServer:
        if not self.server.is_running():
            self.server.start()
        self._register()
        return self

    def stop(self) -> None:
        if self.server.is_running():
            self.server.clear()
            self.server.stop()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget queued replies and recorded requests (between tests sharing one server)."""
        with self._lock:
            for protocol in PROTOCOLS:
                self._queues[protocol].clear()
                self._requests[protocol].clear()
                self._served[protocol].clear()
            self.pauses.clear()
            self._limits.clear()
            self.bedrock_auth = None
        self.server.clear()
        self._register()

    def _register(self) -> None:
        for protocol, path in PATHS.items():
            self.server.expect_request(path, method="POST").respond_with_handler(self._handler(protocol))
        for protocol, pattern in CLOUD_PATHS.items():
            self.server.expect_request(pattern, method="POST").respond_with_handler(self._handler(protocol))
        self.server.expect_request(BEDROCK_PATH, method="POST").respond_with_handler(
            self._handler("anthropic", bedrock=True))

    def base_url(self, protocol: WireProtocol) -> str:
        """The SDK `base_url` (the OpenAI SDK appends `/responses`, the Anthropic SDK `/v1/messages`)."""
        return self.server.url_for("/v1") if protocol != "anthropic" else self.server.url_for("/").rstrip("/")

    # queueing replies

    def reply_raw(self, protocol: WireProtocol, body: Any, *, status: int = 200,
                  headers: Mapping[str, str] | None = None, sse: SSEOptions | None = None) -> None:
        """Queue `body` as is (streamed with `sse_events` if the request asks for a stream and status < 400)."""
        with self._lock:
            self._queues[protocol].append(_Reply(status, body, dict(headers or {}), sse or SSEOptions()))

    def reply_text(self, protocol: WireProtocol, text: str, *, usage: FakeUsage | None = None,
                   model: str = FAKE_MODEL, sse: SSEOptions | None = None) -> None:
        self.reply_raw(protocol, _BODIES[protocol](text, [], usage or FakeUsage(), model), sse=sse)

    def reply_tool_calls(self, protocol: WireProtocol, calls: Sequence[FakeCall | tuple[str, Any]], *,
                         text: str | None = None, usage: FakeUsage | None = None,
                         model: str = FAKE_MODEL, sse: SSEOptions | None = None) -> None:
        fake_calls = [c if isinstance(c, FakeCall) else FakeCall(name=c[0], arguments=c[1]) for c in calls]
        self.reply_raw(protocol, _BODIES[protocol](text, fake_calls, usage or FakeUsage(), model), sse=sse)

    def reply_error(self, protocol: WireProtocol, status: int, *, message: str = "fake error",
                    headers: Mapping[str, str] | None = None) -> None:
        self.reply_raw(protocol, error_body(protocol, status, message), status=status, headers=headers)

    def rate_limit(self, protocol: WireProtocol, per_second: int, *, retry_after: float = 1.0) -> None:
        """Answer 429 (with `Retry-After`) to any request beyond `per_second` served in the last second,
        like a provider's rate limit; a refused request leaves the reply queue untouched."""
        with self._lock:
            self._limits[protocol] = (per_second, retry_after)

    # inspection

    def requests(self, protocol: WireProtocol) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests[protocol])

    def bodies(self, protocol: WireProtocol) -> list[Any]:
        """The JSON bodies the SDK sent for `protocol`, oldest first."""
        return [r.body for r in self.requests(protocol)]

    def last_body(self, protocol: WireProtocol) -> Any:
        bodies = self.bodies(protocol)
        assert bodies, f"no {protocol} request was received"
        return bodies[-1]

    def pending(self, protocol: WireProtocol) -> int:
        with self._lock:
            return len(self._queues[protocol])

    def _handler(self, protocol: WireProtocol, *, bedrock: bool = False) -> Any:
        def handle(request: Request) -> Response:
            try:
                body = json.loads(request.get_data(as_text=True) or "null")
            except json.JSONDecodeError:
                body = request.get_data(as_text=True)
            with self._lock:
                now = time.monotonic()
                auth_problem = self._bedrock_auth_problem(request) if bedrock else None
                refused = None if auth_problem else self._over_limit(protocol, now)
                path = f"{request.path}?{request.query_string.decode()}" if request.query_string else request.path
                self._requests[protocol].append(RecordedRequest(path, dict(request.headers), body, now,
                                                                refused is not None, auth_problem))
                if auth_problem is not None:
                    kind = "InvalidSignatureException" if "signature" in auth_problem else "UnrecognizedClientException"
                    return Response(json.dumps({"message": auth_problem}), status=403,
                                    headers={"x-amzn-ErrorType": kind}, content_type="application/json")
                if refused is not None:
                    return refused
                reply = self._queues[protocol].popleft() if self._queues[protocol] else None
            if reply is None:
                reply = _Reply(418, error_body(protocol, 418, f"fake server: no {protocol} reply queued"), {})
            if reply.status < 400 and bedrock and request.path.endswith(BEDROCK_STREAM_SUFFIX):
                frames = bedrock_frames(reply.body)
                error = eventstream.exception(reply.sse.error_type, "fake stream error")
                return self._stream(frames, error, reply, eventstream.CONTENT_TYPE)
            if reply.status < 400 and isinstance(body, dict) and body.get("stream") is True:
                include_usage = (bool((body.get("stream_options") or {}).get("include_usage"))
                                 and reply.sse.usage)
                events = [e.encode() for e in sse_events(protocol, reply.body, include_usage=include_usage)]
                error = stream_error_event(protocol, reply.sse.error_type).encode()
                return self._stream(events, error, reply, "text/event-stream")
            return Response(json.dumps(reply.body), status=reply.status, headers=dict(reply.headers),
                            content_type="application/json")

        return handle

    def _bedrock_auth_problem(self, request: Request) -> str | None:
        """Why Bedrock would refuse this request's credentials (None: accepted); lock held."""
        expected = self.bedrock_auth
        if expected is None:
            return "fake server: set FakeLLMServer.bedrock_auth to accept Bedrock requests"
        if isinstance(expected, str):
            given = request.headers.get("Authorization", "")
            return None if given == f"Bearer {expected}" else f"the Bedrock API key is missing or wrong: {given!r}"
        # The URL as the client sent (and signed) it: the raw path, not werkzeug's decoded one.
        raw_path = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.full_path
        url = f"{request.scheme}://{request.host}{raw_path}"
        return sigv4_problem(request.method, url, request.headers, request.get_data(), expected)

    def _over_limit(self, protocol: WireProtocol, now: float) -> Response | None:
        """A 429 when `protocol` is rate limited and its budget for the last second is spent (lock held)."""
        limit = self._limits.get(protocol)
        if limit is None:
            return None
        per_second, retry_after = limit
        served = self._served[protocol]
        while served and served[0] <= now - 1.0:
            served.popleft()
        if len(served) >= per_second:
            body = error_body(protocol, 429, f"fake server: more than {per_second} requests per second")
            return Response(json.dumps(body), status=429, headers={"Retry-After": str(retry_after)},
                            content_type="application/json")
        served.append(now)
        return None

    def _stream(self, events: list[bytes], error: bytes, reply: _Reply, content_type: str) -> Response:
        """`events` sent one by one (cut off or paused as `reply.sse` says; `error` is its in-stream error)."""
        options = reply.sse

        def generate() -> Iterator[bytes]:
            for sent, event in enumerate(events):
                if options.cut_after is not None and sent >= options.cut_after:
                    if options.cut == "reset":
                        # werkzeug treats this as the client going away: it stops without the final
                        # zero-length chunk and closes the socket, so the client sees a truncated body.
                        raise ConnectionResetError("fake server: stream cut off")
                    if options.cut == "error":
                        yield error
                    return
                if options.pause_after is not None and sent == options.pause_after:
                    resumed = options.resume.wait(options.pause_timeout) if options.resume else False
                    with self._lock:
                        self.pauses.append(resumed)
                yield event

        headers = {"Cache-Control": "no-cache", **reply.headers}
        return Response(generate(), status=reply.status, headers=headers, content_type=content_type)
