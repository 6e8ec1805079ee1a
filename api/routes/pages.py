"""The pages (no data without a token: they call the API from the browser), the API docs from local files (no
CDN: they work offline; started by a script file, no inline script) and the problem types."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse, JSONResponse

from durable_agent.api.problems import PROBLEM_BASE, PROBLEM_TYPES, Problem
from durable_agent.api.routes.common import STATIC

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> Response:
    return HTMLResponse('<!doctype html><meta charset="utf-8"><title>Durable Agent</title>'
                        '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
                        '<p><a href="/inbox">Approvals inbox</a> · <a href="/chat">Chat</a> · '
                        '<a href="/docs">API docs</a></p>')


@router.get("/inbox")
async def inbox_page() -> Response:
    return HTMLResponse((STATIC / "inbox.html").read_text())


@router.get("/chat")
async def chat_page() -> Response:
    return HTMLResponse((STATIC / "chat.html").read_text())


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml",
                    headers={"Cache-Control": "max-age=86400"})


@router.get("/docs")
async def swagger_ui() -> Response:
    return HTMLResponse((STATIC / "docs.html").read_text())


@router.get("/redoc")
async def redoc() -> Response:
    return HTMLResponse((STATIC / "redoc.html").read_text())


@router.get("/problems/{slug}")
async def problem_doc(slug: str) -> Response:
    if slug not in PROBLEM_TYPES:
        raise Problem("not-found", f"no problem type {slug!r}")
    status, title = PROBLEM_TYPES[slug]
    return JSONResponse({"type": PROBLEM_BASE + slug, "title": title, "status": status})
