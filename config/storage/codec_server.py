"""`dagent codec-server`: the Temporal codec-server HTTP protocol, so the UI and CLI can show decrypted payloads.

`POST /decode` and `POST /encode` take and return `{"payloads": [...]}` (protobuf JSON of
`temporal.api.common.v1.Payloads`; the `X-Namespace` header names the namespace). CORS answers the
configured UI origins only (with credentials, as the UI sends them). When an auth token is configured,
every request must carry `Authorization: Bearer <token>`; the UI sends it when "Pass access token" is on
(or through its auth), the CLI with `--codec-auth 'Bearer <token>'`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from durable_agent.agent.logging import get_logger
from durable_agent.config.storage.codec import AESGCMCodec, CodecKeyError

log = get_logger("codec_server")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"


def create_app(codec: AESGCMCodec, *, origins: Sequence[str], auth_token: str | None) -> web.Application:
    allowed = {o.rstrip("/") for o in origins}
    expected = f"Bearer {auth_token}" if auth_token else None

    @web.middleware
    async def cors_and_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin", "")
        if request.method == "OPTIONS":
            response: web.StreamResponse = web.Response(status=204)
        elif expected is not None and not hmac.compare_digest(
                request.headers.get("Authorization", "").encode(), expected.encode()):
            response = web.json_response({"error": "missing or wrong Authorization header"}, status=401)
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = web.json_response({"error": exc.reason}, status=exc.status)
        if origin and origin.rstrip("/") in allowed:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    async def transform(request: web.Request, encode: bool) -> web.Response:
        try:
            payloads = json_format.Parse(await request.text(), Payloads(), ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            return web.json_response({"error": f"body is not a Payloads JSON object: {exc}"}, status=400)
        try:
            out = [codec.encode_one(p) if encode else codec.decode_one(p) for p in payloads.payloads]
        except CodecKeyError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        log.debug("codec request", path=request.path, payloads=len(out),
                  namespace=request.headers.get("X-Namespace", ""))
        return web.json_response(json_format.MessageToDict(Payloads(payloads=out)))

    async def encode(request: web.Request) -> web.Response:
        return await transform(request, encode=True)

    async def decode(request: web.Request) -> web.Response:
        return await transform(request, encode=False)

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "key_ids": codec.key_ids})

    app = web.Application(middlewares=[cors_and_auth], client_max_size=64 * 1024 * 1024)
    app.router.add_post("/encode", encode)
    app.router.add_post("/decode", decode)
    app.router.add_get("/health", health)
    return app


async def serve(codec: AESGCMCodec, *, host: str, port: int, origins: Sequence[str],
                auth_token: str | None) -> web.AppRunner:
    """Start the server; returns the runner (`await runner.cleanup()` stops it)."""
    runner = web.AppRunner(create_app(codec, origins=origins, auth_token=auth_token), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
