"""`GET /prompts/{id}/files/{index}`: a file a tool attached to a prompt, downloaded.

Authorised exactly like reading the prompt (its user, an approver or an admin). The file is named by its
place in the prompt's output (`index`, as in the record and the events), so two files with one name stay
apart. Served with its media type, always as an attachment (`Content-Disposition: attachment`), never
sniffed and, with `Content-Security-Policy: sandbox`, never run as a page even if a browser opened it: a
tool's HTML cannot script the API's origin.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path
from fastapi.responses import Response

from durable_agent.agent.models import FileOutput
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, PathId, Service

router = APIRouter()

MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$")
FALLBACK_TYPE = "application/octet-stream"


def file_path(prompt_id: str, index: int) -> str:
    """Where the file at `index` of the prompt's output is downloaded."""
    return f"/prompts/{prompt_id}/files/{index}"


def content_disposition(name: str) -> str:
    """`attachment` with the file's name: an ASCII fallback and the exact name (RFC 6266 / RFC 5987)."""
    plain = re.sub(r"[^A-Za-z0-9._ -]", "_", name).strip() or "file"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


@router.get("/prompts/{prompt_id}/files/{index}", tags=["prompts"], response_class=Response, responses={
    200: {"description": "The file's content, as an attachment.", "content": {"application/octet-stream": {}}}})
async def download_file(prompt_id: PathId, index: Annotated[int, Path(ge=0, le=1_000_000)], caller: Caller,
                        service: Service) -> Response:
    """A file the prompt's tools attached: `index` is its place in the prompt's `output` (a `file` entry)."""
    _, prompt = await service.prompt(caller, prompt_id)
    entry = prompt.output[index] if index < len(prompt.output) else None
    if not isinstance(entry, FileOutput):
        raise Problem("not-found", f"prompt {prompt_id!r} has no file at output {index}")
    try:
        content = await service.agent.read_file(entry.content_ref)
    except FileNotFoundError:
        raise Problem("not-found", f"the content of {entry.name!r} is no longer in the file store") from None
    media_type = entry.media_type if MEDIA_TYPE.match(entry.media_type) else FALLBACK_TYPE
    return Response(content, media_type=media_type, headers={
        "Content-Disposition": content_disposition(entry.name), "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox", "Cache-Control": "private, no-store"})


__all__ = ["content_disposition", "file_path", "router"]
