"""RFC 9457 problem details with stable types: every error the API returns is one of these."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.exceptions import WorkflowAlreadyStartedError

from durable_agent.agent.ids import IdTaken
from durable_agent.agent.logging import get_logger
from durable_agent.api.headers import security_headers

log = get_logger("durable_agent.api.problems")

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE = "/problems/"

# slug -> (status, title). The slugs are public contract: clients branch on `type`.
PROBLEM_TYPES: dict[str, tuple[int, str]] = {
    "unauthenticated": (401, "Authentication required"),
    "not-allowed": (403, "Not allowed"),
    "unknown-prompt": (404, "Unknown prompt"),
    "unknown-conversation": (404, "Unknown conversation"),
    "unknown-tool-call": (404, "Unknown tool call"),
    "not-found": (404, "Not found"),
    "not-pending": (409, "Not pending"),
    "already-decided": (409, "Already decided"),
    "prompt-finished": (409, "Prompt already finished"),
    "decision-refused": (409, "Decision refused"),
    "id-taken": (409, "Id already used"),
    "payload-too-large": (413, "Request body too large"),
    "invalid-request": (422, "Invalid request"),
    "invalid-arguments": (422, "Invalid arguments"),
    "temporal-unavailable": (503, "Temporal unavailable"),
    "internal-error": (500, "Internal error"),
}


class Problem(Exception):
    """Raise anywhere in a route: becomes a problem+json response."""

    def __init__(self, slug: str, detail: str, **extensions: Any) -> None:
        if slug not in PROBLEM_TYPES:
            raise ValueError(f"unknown problem type {slug!r}")
        super().__init__(detail)
        self.slug = slug
        self.detail = detail
        self.extensions = extensions


def problem_body(slug: str, detail: str, instance: str | None = None, **extensions: Any) -> dict[str, Any]:
    status, title = PROBLEM_TYPES[slug]
    body: dict[str, Any] = {"type": PROBLEM_BASE + slug, "title": title, "status": status, "detail": detail}
    if instance:
        body["instance"] = instance
    body.update(extensions)
    return body


def problem_response(slug: str, detail: str, instance: str | None = None, **extensions: Any) -> JSONResponse:
    body = problem_body(slug, detail, instance, **extensions)
    headers = {"WWW-Authenticate": "Bearer"} if slug == "unauthenticated" else None
    return JSONResponse(body, status_code=body["status"], media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def on_problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.slug, exc.detail, request.url.path, **exc.extensions)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in exc.errors()]
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors) or "invalid request"
        return problem_response("invalid-request", detail, request.url.path, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        slug = {401: "unauthenticated", 403: "not-allowed", 413: "payload-too-large"}.get(exc.status_code, "not-found")
        if exc.status_code not in (401, 403, 404, 413):
            body = {"type": "about:blank", "title": str(exc.detail), "status": exc.status_code,
                    "detail": str(exc.detail), "instance": request.url.path}
            return JSONResponse(body, status_code=exc.status_code, media_type=PROBLEM_MEDIA_TYPE)
        return problem_response(slug, str(exc.detail), request.url.path)

    @app.exception_handler(WorkflowAlreadyStartedError)
    async def on_taken(request: Request, exc: WorkflowAlreadyStartedError) -> JSONResponse:
        return problem_response("id-taken", f"the id {exc.workflow_id!r} is already used by a workflow "
                                            "(running or closed); ids are never reused", request.url.path)

    @app.exception_handler(IdTaken)
    async def on_squatted(request: Request, exc: IdTaken) -> JSONResponse:
        log.warning("a derived workflow id is taken", path=request.url.path, workflow_id=exc.workflow_id,
                    found=exc.found)
        return problem_response("id-taken", str(exc), request.url.path)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises after this (so the server logs the traceback); the client sees no internals.
        log.error("unhandled error", path=request.url.path, error_type=type(exc).__name__)
        response = problem_response("internal-error", "the API failed to answer this request; the error is in its "
                                    "log", request.url.path)
        response.headers.update(security_headers(request.url.path))  # sent outside the headers middleware
        return response
