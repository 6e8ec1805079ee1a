"""The pages (no data without a token: they call the API from the browser), the API docs from local files (no
CDN: they work offline; started by a script file, no inline script) and the problem types.

The pages' HTML is put together from api/static: every page is the one document shell (page.html: its
Content-Security-Policy, icon and title) around its own body, and the inbox's and chat's bodies sit in the
signed-in frame (signed-in.html: header, nav, sign-in slot and their scripts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from string import Template

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse, JSONResponse

from durable_agent.api.problems import PROBLEM_BASE, PROBLEM_TYPES, Problem
from durable_agent.api.routes.common import STATIC

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class Page:
    title: str
    name: str  # its body is static/<name>.html; a signed-in page's script is static/<name>.js
    signed_in: bool = False
    stylesheet: str | None = None


SIGNED_IN_STYLESHEET = "/static/style.css"
PAGES = {
    "/inbox": Page("Approvals inbox", "inbox", signed_in=True, stylesheet=SIGNED_IN_STYLESHEET),
    "/chat": Page("Chat", "chat", signed_in=True, stylesheet=SIGNED_IN_STYLESHEET),
    "/docs": Page("API docs", "docs", stylesheet="/docs-assets/swagger-ui.css"),
    "/redoc": Page("API reference", "redoc"),
}
NAV = ("/inbox", "/chat", "/docs")  # what a page's nav links to, in order (not to itself)


def nav_links(*, leaving_out: str = "") -> list[str]:
    return [f'<a href="{path}">{PAGES[path].title}</a>' for path in NAV if path != leaving_out]


def _static(name: str) -> str:
    return (STATIC / name).read_text().rstrip("\n")


@cache
def page_html(path: str) -> str:
    page = PAGES[path]
    body = _static(f"{page.name}.html")
    if page.signed_in:
        body = Template(_static("signed-in.html")).substitute(
            title=page.title, nav=" ".join(nav_links(leaving_out=path)), content=body, name=page.name)
    else:  # the API docs: a way back to the other pages
        body = f'<nav class="pages" aria-label="Pages">{" ".join(nav_links(leaving_out=path))}</nav>\n{body}'
    stylesheet = f'\n  <link rel="stylesheet" href="{page.stylesheet}">' if page.stylesheet else ""
    return Template(_static("page.html")).substitute(title=page.title, stylesheet=stylesheet, body=body) + "\n"


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
