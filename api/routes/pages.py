"""The pages (no data without a token: they call the API from the browser), the API docs from local files (no
CDN: they work offline; started by a script file, no inline script) and the problem types."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse, JSONResponse

from durable_agent.api.page_html import PAGES, nav_links, page_html
from durable_agent.api.problems import PROBLEM_BASE, PROBLEM_TYPES, Problem
from durable_agent.api.routes.common import STATIC

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> Response:
    return HTMLResponse('<!doctype html><meta charset="utf-8"><title>Durable Agent</title>'
                        '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
                        f'<p>{" · ".join(nav_links())}</p>')


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml",
                    headers={"Cache-Control": "max-age=86400"})


def _serve(path: str) -> None:
    async def page() -> Response:
        return HTMLResponse(page_html(path))

    router.add_api_route(path, page, methods=["GET"], name=PAGES[path].name)


for _path in PAGES:
    _serve(_path)


@router.get("/problems/{slug}")
async def problem_doc(slug: str) -> Response:
    if slug not in PROBLEM_TYPES:
        raise Problem("not-found", f"no problem type {slug!r}")
    status, title = PROBLEM_TYPES[slug]
    return JSONResponse({"type": PROBLEM_BASE + slug, "title": title, "status": status})
