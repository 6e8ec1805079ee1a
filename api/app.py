"""The FastAPI app: routes over `AgentClient`, authenticated, with problem+json errors and SSE.

`create_app(agent=..., config=...)` serves an existing client (tests, the quick start); without a client it
connects with `Settings.from_env()` at startup (`dagent api`). The routes are in api/routes/*, one module by resource;
`ROUTERS` lists them, and a new resource is one line there.

The OpenAPI document says how every route is authorised: a bearer scheme (an API key or a JWT in `Authorization:
Bearer …`), required everywhere, so `/docs` (Swagger UI) offers **Authorize** and "Try it out" sends the key. The
pages and problem types are outside the schema and need no key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.staticfiles import StaticFiles

from durable_agent.api.auth import Authenticator
from durable_agent.api.config import ApiConfig
from durable_agent.api.headers import SecurityHeadersMiddleware
from durable_agent.api.limits import BodyLimitMiddleware
from durable_agent.api.problems import install_problem_handlers
from durable_agent.api.routes import approvals, conversations, events, pages, prompts, slack
from durable_agent.api.routes.budgets import router as budget_routes
from durable_agent.api.routes.common import STATIC
from durable_agent.api.routes.prompt_files import router as prompt_file_routes
from durable_agent.api.routes.schedules import router as schedule_routes
from durable_agent.api.service import AgentService
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings

SWAGGER_ASSETS = resources.files("fastapi_offline") / "static"  # Swagger UI and ReDoc, shipped on PyPI
DOCS_ASSETS = "/docs-assets"
BEARER = {"type": "http", "scheme": "bearer", "description": (
    "An API key from the API's configuration, or a JWT from the configured issuer: "
    "`Authorization: Bearer <key or token>`.")}

# In the order of the OpenAPI document.
ROUTERS: list[APIRouter] = [
    schedule_routes,  # recurring prompts (api/routes/schedules.py)
    pages.router,  # pages, API docs, problem types (not in the schema)
    prompts.router,  # /me, /prompts
    approvals.router,  # /approvals, deciding, /prompts/{id}/approvals: one prompt's waiting calls
    prompt_file_routes,  # /prompts/{id}/files/{index}: attached files, downloaded (api/routes/prompt_files.py)
    budget_routes,  # /budgets (api/routes/budgets.py)
    conversations.router,  # /conversations
    events.router,  # /prompts/{id}/events, /agui
    slack.router,  # /slack/interactions: Slack's Approve / Reject buttons (not in the schema)
]


def create_app(agent: AgentClient | None = None, config: ApiConfig | None = None,
               settings: Settings | None = None) -> FastAPI:
    config = config or ApiConfig.load()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = agent or await AgentClient.connect(settings or Settings.from_env())
        app.state.service = AgentService(client, config)
        yield

    app = FastAPI(title="Durable Agent API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Prompts, conversations, approvals and live events of Durable Agent. "
                              "Every request needs `Authorization: Bearer <API key or JWT>`; errors are "
                              "RFC 9457 problem details (`application/problem+json`).")
    app.state.authenticator = Authenticator(config)
    app.state.config = config
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    app.add_middleware(SecurityHeadersMiddleware)
    install_problem_handlers(app)
    install_security_scheme(app)  # /docs can authorise
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(SWAGGER_ASSETS)), name="docs-assets")
    return app


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
