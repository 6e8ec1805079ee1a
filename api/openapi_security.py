"""The OpenAPI document says how every route is authorised: a bearer scheme (an API key or a JWT in
`Authorization: Bearer …`), required everywhere, so `/docs` (Swagger UI) offers **Authorize** and "Try it
out" sends the key. The pages and problem types are outside the schema and need no key."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

BEARER = {"type": "http", "scheme": "bearer", "description": (
    "An API key from the API's configuration, or a JWT from the configured issuer: "
    "`Authorization: Bearer <key or token>`.")}


def install_security_scheme(app: FastAPI) -> None:
    """Make `app.openapi()` declare the bearer scheme and require it on every operation."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes, tags=app.openapi_tags)
            schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearer"] = BEARER
            schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["install_security_scheme"]
