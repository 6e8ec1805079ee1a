"""Tools with big outputs and big files, and a scripted model, for the shared-store tests (worker subprocesses):

    DAGENT_PLUGINS=tests.support.bigblobs:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.bigblobs:model

Round 1 calls `blob.report` (a ~200 KB result and a ~400 KB file), round 2 calls `blob.publish`, which
needs approval, round 3 answers. Every tool result names the worker process that ran it, so a test can
tell which worker did which part.
"""

from __future__ import annotations

import hashlib
import os

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool

REPORT_CHARS = 200_000
FILE_CHARS = 400_000


def big_text(seed: str, size: int) -> str:
    """Deterministic text of `size` characters that does not compress to nothing."""
    chunks, counter = [], 0
    while sum(len(c) for c in chunks) < size:
        chunks.append(hashlib.sha256(f"{seed}/{counter}".encode()).hexdigest() + " ")
        counter += 1
    return "".join(chunks)[:size]


class ReportInput(BaseModel):
    topic: str


@tool("blob.report")
async def report(args: ReportInput, ctx: ToolContext) -> dict[str, object]:
    """Write a long report and attach it as a file."""
    attached = ctx.add_file("report.txt", big_text(f"file:{args.topic}", FILE_CHARS), summary="the report")
    return {"pid": os.getpid(), "content_ref": attached.content_ref,
            "report": big_text(f"result:{args.topic}", REPORT_CHARS)}


@tool("blob.publish", approval=Approval(reason="Publishing needs approval."))
async def publish(args: ReportInput, ctx: ToolContext) -> dict[str, object]:
    """Publish the report."""
    return {"pid": os.getpid(), "published": args.topic}


plugin = Plugin("bigblobs", tools=[report, publish], instructions="You write big reports.")


def _script(request: ModelRequest) -> ModelResponse:
    results = results_since_last_user(request)
    if not results:
        return tool_calls(("blob.report", {"topic": "tides"}), text="Writing the report.")
    if len(results) == 1:
        return tool_calls(("blob.publish", {"topic": "tides"}), text="Publishing it.")
    return text("Published the tides report.")


model = ScriptedModel(_script, model="scripted-bigblobs")
