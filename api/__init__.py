"""The web surface: `dagent api` (FastAPI) with live events over SSE and AG-UI, identities, and two pages.

Needs the `api` extra; `import durable_agent.api` works without it, `create_app` then raises `MissingExtra`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name != "create_app":
        raise AttributeError(f"module 'durable_agent.api' has no attribute {name!r}")
    from durable_agent.agent.extras import require

    require("api", "the HTTP API (durable_agent.api)")
    from durable_agent.api.app import create_app

    return create_app


if TYPE_CHECKING:
    from durable_agent.api.app import create_app
