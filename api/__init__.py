"""The web surface: `dagent api` (FastAPI) with live events over SSE and AG-UI, identities, and two pages."""

from durable_agent.api.app import create_app

__all__ = ["create_app"]
