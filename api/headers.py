"""Security headers on every response: no framing, no MIME sniffing, and a Content-Security-Policy.

The inbox and chat pages load only their own scripts and stylesheet (`/static/...`, no inline code) and call
the API on the same origin, so their policy allows `'self'` and nothing else. API responses (JSON, SSE,
problems) get `default-src 'none'`. The interactive docs (`/docs`, `/redoc`, served from local files) carry
their policy in the page itself (api/static/page.html: Swagger UI's inline styles and ReDoc's blob: worker),
so the header leaves them out; they keep the framing and sniffing headers.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
PAGES = ("/", "/inbox", "/chat")
NO_CSP = ("/docs", "/redoc")  # their policy is in the page (api/static/page.html)


def security_headers(path: str) -> dict[str, str]:
    headers = {"x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}
    if path in PAGES or path.startswith("/static/"):
        headers["content-security-policy"] = PAGE_CSP
    elif not path.startswith(NO_CSP):
        headers["content-security-policy"] = API_CSP
    return headers


class SecurityHeadersMiddleware:
    """Adds `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and the
    path's Content-Security-Policy (with `frame-ancestors 'none'`) to every HTTP response. (A 500 is answered by
    Starlette's outermost error middleware, outside this one: its handler adds `security_headers` itself.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [(name.encode(), value.encode()) for name, value in security_headers(scope.get("path", "")).items()]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((name, value) for name, value in extra if name not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)
