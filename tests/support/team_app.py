"""A Temporal team's own application, as source text written outside the package (tests/temporal/test_team_app.py
writes it to a temporary directory and imports it from there): its payload codec, a library its workflow
imports that needs a sandbox passthrough (it reads the clock when imported), its own workflow and activity,
and a Durable Agent plugin whose payment tool needs finance's approval."""

from __future__ import annotations

from pathlib import Path

TEAMLIB = '''
"""The team's library: reads the clock at import, so a sandboxed workflow may import it only passed through."""
import datetime

LOADED_AT = datetime.datetime.now()


def invoice_total(invoice_id: str) -> int:
    return 100 + len(invoice_id)
'''

TEAMAPP_CODEC = '''
"""The team's payload codec: zlib, marked with the team's own encoding."""
import zlib
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/team-zlib"


class TeamCodec(PayloadCodec):
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload(metadata={"encoding": ENCODING}, data=zlib.compress(p.SerializeToString()))
                for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCODING:
                raise ValueError("payload not encoded by TeamCodec")
            inner = Payload()
            inner.ParseFromString(zlib.decompress(p.data))
            out.append(inner)
        return out
'''

TEAMAPP_WORKFLOWS = '''
"""The team's own workflow and activity, next to Durable Agent's on one worker."""
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import VersioningBehavior

import teamlib  # passed through by the team's SandboxedWorkflowRunner (it reads the clock when imported)


@activity.defn(name="team.lookup_invoice")
async def lookup_invoice(invoice_id: str) -> int:
    return teamlib.invoice_total(invoice_id)


async def pay(invoice_id: str) -> str:
    total = await workflow.execute_activity(lookup_invoice, invoice_id, start_to_close_timeout=timedelta(seconds=10))
    return f"{invoice_id}: {total}"


@workflow.defn(name="PayInvoiceWorkflow")
class PayInvoiceWorkflow:
    """On an unversioned worker (Temporal refuses a versioning behavior there)."""

    @workflow.run
    async def run(self, invoice_id: str) -> str:
        return await pay(invoice_id)


@workflow.defn(name="PayInvoiceWorkflow", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class VersionedPayInvoiceWorkflow:
    """The same workflow on the team's versioned workers: it moves to the current build at its next task."""

    @workflow.run
    async def run(self, invoice_id: str) -> str:
        return await pay(invoice_id)
'''

TEAMAPP_TOOLS = '''
"""The team's Durable Agent plugin: payments need finance's approval."""
from pydantic import BaseModel

from durable_agent import Approval, Plugin, ToolContext, tool


class PaymentInput(BaseModel):
    invoice_id: str


@tool("payment.send", approval=Approval(reason="Payments need finance.", approvers=["role:finance"]))
async def send_payment(args: PaymentInput, ctx: ToolContext) -> dict:
    """Pay an invoice."""
    return {"paid": args.invoice_id}


plugin = Plugin("finance", tools=[send_payment])
'''


def write_team_app(root: Path) -> Path:
    """The team's modules under `root` (put `root` on sys.path to import them): `teamlib`, `teamapp.codec`,
    `teamapp.workflows`, `teamapp.tools`."""
    (root / "teamapp").mkdir(parents=True)
    (root / "teamlib.py").write_text(TEAMLIB)
    (root / "teamapp" / "__init__.py").write_text("")
    (root / "teamapp" / "codec.py").write_text(TEAMAPP_CODEC)
    (root / "teamapp" / "workflows.py").write_text(TEAMAPP_WORKFLOWS)
    (root / "teamapp" / "tools.py").write_text(TEAMAPP_TOOLS)
    return root
