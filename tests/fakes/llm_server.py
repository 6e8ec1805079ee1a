"""A local fake LLM server speaking three wire protocols over real HTTP.

OpenAI Responses (`POST /v1/responses`), OpenAI Chat Completions (`POST /v1/chat/completions`) and Anthropic
Messages (`POST /v1/messages`), served by pytest-httpserver. Replies are queued per protocol and served in
order; every JSON request body (and its headers) is recorded so tests can assert what the SDK sent. A
request with nothing queued gets a 418 whose message says so, which the providers map to a fatal error.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

WireProtocol = Literal["responses", "chat", "anthropic"]
PROTOCOLS: tuple[WireProtocol, ...] = ("responses", "chat", "anthropic")
PATHS: dict[WireProtocol, str] = {
    "responses": "/v1/responses",
    "chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
}
FAKE_MODEL = "fake-model"


@dataclass(frozen=True)
class FakeUsage:
    """Token counts as the wire protocol reports them (Anthropic's `input_tokens` excludes cache reads)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class FakeCall:
    """A tool call to send. `arguments` as a str is sent verbatim (so it can be malformed JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class _Reply:
    status: int
    body: Any
    headers: Mapping[str, str]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


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
            "cache_creation_input_tokens": 0,
            "output_tokens_details": {"thinking_tokens": usage.reasoning_tokens},
        },
    }


_BODIES = {"responses": responses_body, "chat": chat_body, "anthropic": anthropic_body}

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
}


def error_body(protocol: WireProtocol, status: int, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "param": None, "code": None}}


# --- the server ---------------------------------------------------------------------------------


class FakeLLMServer:
    """Queue replies with `reply_text` / `reply_tool_calls` / `reply_error`; point an SDK at `base_url`."""

    def __init__(self, server: HTTPServer | None = None):
        self.server = server or HTTPServer(host="127.0.0.1", port=0, threaded=True)
        self._lock = threading.Lock()
        self._queues: dict[WireProtocol, deque[_Reply]] = {p: deque() for p in PROTOCOLS}
        self._requests: dict[WireProtocol, list[RecordedRequest]] = {p: [] for p in PROTOCOLS}

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
        self.server.clear()
        self._register()

    def _register(self) -> None:
        for protocol, path in PATHS.items():
            self.server.expect_request(path, method="POST").respond_with_handler(self._handler(protocol))

    def base_url(self, protocol: WireProtocol) -> str:
        """The SDK `base_url` (the OpenAI SDK appends `/responses`, the Anthropic SDK `/v1/messages`)."""
        return self.server.url_for("/v1") if protocol != "anthropic" else self.server.url_for("/").rstrip("/")

    # queueing replies

    def reply_raw(self, protocol: WireProtocol, body: Any, *, status: int = 200,
                  headers: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._queues[protocol].append(_Reply(status, body, dict(headers or {})))

    def reply_text(self, protocol: WireProtocol, text: str, *, usage: FakeUsage | None = None,
                   model: str = FAKE_MODEL) -> None:
        self.reply_raw(protocol, _BODIES[protocol](text, [], usage or FakeUsage(), model))

    def reply_tool_calls(self, protocol: WireProtocol, calls: Sequence[FakeCall | tuple[str, Any]], *,
                         text: str | None = None, usage: FakeUsage | None = None,
                         model: str = FAKE_MODEL) -> None:
        fake_calls = [c if isinstance(c, FakeCall) else FakeCall(name=c[0], arguments=c[1]) for c in calls]
        self.reply_raw(protocol, _BODIES[protocol](text, fake_calls, usage or FakeUsage(), model))

    def reply_error(self, protocol: WireProtocol, status: int, *, message: str = "fake error",
                    headers: Mapping[str, str] | None = None) -> None:
        self.reply_raw(protocol, error_body(protocol, status, message), status=status, headers=headers)

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

    def _handler(self, protocol: WireProtocol) -> Any:
        def handle(request: Request) -> Response:
            try:
                body = json.loads(request.get_data(as_text=True) or "null")
            except json.JSONDecodeError:
                body = request.get_data(as_text=True)
            with self._lock:
                self._requests[protocol].append(RecordedRequest(request.path, dict(request.headers), body))
                reply = self._queues[protocol].popleft() if self._queues[protocol] else None
            if reply is None:
                reply = _Reply(418, error_body(protocol, 418, f"fake server: no {protocol} reply queued"), {})
            return Response(json.dumps(reply.body), status=reply.status, headers=dict(reply.headers),
                            content_type="application/json")

        return handle
