"""The pages' HTML, put together from api/static: every page is the one document shell (page.html: its
Content-Security-Policy, icon and title) around its own body, and the inbox's and chat's bodies sit in the
signed-in frame (signed-in.html: header, nav, sign-in slot and their scripts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from string import Template

from durable_agent.api.routes.common import STATIC


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
