"""The web surface: `dagent api` (FastAPI) with live events over SSE and AG-UI, identities, and two pages."""

from api.app import create_app

__all__ = ["create_app"]
