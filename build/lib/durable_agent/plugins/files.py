"""Files: tools that hand the user a file while the model sees only a summary.

A worked example of `ctx.add_file(...)`. `file.write` stores the full content in the worker's file store
(outside the prompt record and outside the model's view) and records a `file` output right after the tool's
own entry; the model is shown the short summary and the `content_ref` it can pass to `file.read` later,
never the content. `file.read` fetches a file back through `ctx.file_store` when the model really needs it.

Load it with `DAGENT_PLUGINS=durable_agent.plugins.files:plugin`. Files land in `DAGENT_FILE_DIR` (content-addressed, so
a retried write stores the same bytes under the same reference).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.tools import tool

DEFAULT_READ_LIMIT = 20_000


class WriteInput(BaseModel):
    name: str = Field(min_length=1, max_length=200, description="File name shown to the user, e.g. notes.md")
    content: str = Field(description="The full text of the file")
    media_type: str = Field(default="text/plain", description="MIME type, e.g. text/markdown or text/csv")


class ReadInput(BaseModel):
    content_ref: str = Field(description="The content_ref returned by file.write")
    max_chars: int = Field(default=DEFAULT_READ_LIMIT, ge=1, le=200_000,
                           description="Return at most this many characters")


def summarize(name: str, media_type: str, content: str) -> str:
    """What the model is told about a file: its shape, not its content."""
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{media_type} file '{name}' with {len(content)} characters in {lines} lines, attached for the user."


@tool("file.write")
async def write_file(args: WriteInput, ctx: ToolContext) -> dict[str, object]:
    """Write a text file and attach it for the user. You get back a reference, not the content."""
    attached = ctx.add_file(args.name, args.content, media_type=args.media_type,
                            summary=summarize(args.name, args.media_type, args.content))
    return {"name": attached.name, "size": attached.size, "content_ref": attached.content_ref}


@tool("file.read")
async def read_file(args: ReadInput, ctx: ToolContext) -> dict[str, object]:
    """Read back a file written earlier, by its content_ref."""
    try:
        data = ctx.file_store.get(args.content_ref)
    except FileNotFoundError:
        raise ValueError(f"No file with reference {args.content_ref!r}.") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"content_ref": args.content_ref, "size": len(data), "binary": True,
                "content": None, "note": "Binary file: its content cannot be shown as text."}
    truncated = len(text) > args.max_chars
    return {"content_ref": args.content_ref, "size": len(data), "truncated": truncated,
            "content": text[: args.max_chars]}


plugin = Plugin(
    "files",
    tools=[write_file, read_file],
    instructions="To give the user a document, write it with file.write instead of pasting it into your answer.",
)
