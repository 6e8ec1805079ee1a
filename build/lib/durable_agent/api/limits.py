"""A hard limit on request bodies, enforced before a route reads them (and so before Temporal sees them)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_agent.api.problems import PROBLEM_MEDIA_TYPE, problem_body


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out `messages` first, then the real one (e.g. a later disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


class BodyLimitMiddleware:
    """Refuses bodies over `max_bytes` with a 413 problem: by Content-Length when declared, else while reading."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, send)
            return
        # Read the whole (small) body first, so an oversized one is refused before any route parses it.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._refuse(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        body = json.dumps(problem_body("payload-too-large", f"the request body exceeds {self.max_bytes} bytes",
                                       scope.get("path"))).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
