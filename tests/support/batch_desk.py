"""A plugin and a scripted model with several approvals in one response, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.support.batch_desk:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.batch_desk:model

The user's text selects the round-1 response:
- `batch ...`: three calls that need approval in one response (`BATCH_CALLS`), in this order;
- `held ...`: a forecast (widget), a report (file) and a $50 payment (no approval, changes the plugin's
  state), then two payments that need approval (`HELD_CALLS`);
- `delegate ...` (with `delegation` loaded too: DAGENT_PLUGINS=...:plugin,tests.support.batch_desk:delegation):
  a sub-agent, the clerk, whose own response is the two payments of a batch that need approval (`CLERK_CALLS`);
- anything else: one $480 payment that needs approval.
Round 2 says what each call returned.
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import Approval, tool
from durable_agent.plugins.demo import get_weather, send_payment, write_report


class EmailInput(BaseModel):
    to: str
    subject: str


@tool("email.send", approval=Approval(reason="Emails to customers need a look."))
async def send_email(args: EmailInput, ctx: ToolContext) -> dict[str, object]:
    """Send an email (taking `BATCH_DESK_EMAIL_SECONDS`, 0 unless set: a test that types while a prompt finishes)."""
    await asyncio.sleep(float(os.environ.get("BATCH_DESK_EMAIL_SECONDS", "0")))
    return {"status": "sent", "to": args.to}


plugin = Plugin("desk", tools=[get_weather, write_report, send_payment, send_email],
                instructions="A desk that pays invoices; payments over $100 and emails need approval.")
CLERK_INSTRUCTIONS = "You are the clerk: pay the invoices you are handed."
clerk = SubAgent("desk.delegate", description="Hand invoices to the clerk.", instructions=CLERK_INSTRUCTIONS,
                 plugins=("desk",), max_rounds=3)
delegation = Plugin("desk-delegation", tools=[clerk.tool()])

BATCH_CALLS = (("payment.send", {"to": "ACME Corp", "amount": 480}),
               ("payment.send", {"to": "Globex", "amount": 120}),
               ("email.send", {"to": "ceo@acme.example", "subject": "Paid"}))
HELD_CALLS = (("weather.get", {"city": "Paris"}),
              ("report.write", {"title": "Paris trip", "body": "Bring an umbrella."}),
              ("payment.send", {"to": "Cafe", "amount": 50}),
              ("payment.send", {"to": "ACME Corp", "amount": 480}),
              ("payment.send", {"to": "Globex", "amount": 120}))
CLERK_CALLS = (("payment.send", {"to": "ACME Corp", "amount": 480}),
               ("payment.send", {"to": "Globex", "amount": 120}))


def _script(request: ModelRequest) -> ModelResponse:
    said = next((m.text for m in reversed(request.messages) if isinstance(m, UserMessage)), "")
    done = results_since_last_user(request)
    if done:
        return text("Done: " + "; ".join(f"{r.tool}: {r.content[:70]}" for r in done))
    if CLERK_INSTRUCTIONS in (request.instructions or ""):
        return tool_calls(*CLERK_CALLS, text="Paying both.")
    if said.startswith("delegate"):
        return tool_calls(("desk.delegate", {"task": "pay the ACME and Globex invoices"}), text="Asking the clerk.")
    if said.startswith("batch"):
        return tool_calls(*BATCH_CALLS, text="Paying both invoices and telling ACME.")
    if said.startswith("held"):
        return tool_calls(*HELD_CALLS, text="Forecast, report and payments.")
    return tool_calls(("payment.send", {"to": "ACME Corp", "amount": 480}), text="Paying the ACME invoice.")


model = ScriptedModel(_script, model="scripted-desk")
