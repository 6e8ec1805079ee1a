"""A desk whose first call only carol may decide, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.support.guarded_desk:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.guarded_desk:model

Round 1 asks for three calls at once (`GUARDED_CALLS`): a wire only carol may approve, then the payment and
the email of the batch desk (anyone may decide them). Round 2 says what each call returned.
"""

from __future__ import annotations

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from tests.support.batch_desk import send_email, send_payment


class WireInput(BaseModel):
    to: str
    amount: float


@tool("wire.send", approval=Approval(reason="Wires need carol.", approvers=["carol"]))
async def send_wire(args: WireInput, ctx: ToolContext) -> dict[str, object]:
    """Wire money abroad."""
    return {"status": "wired", "to": args.to}


plugin = Plugin("guarded-desk", tools=[send_wire, send_payment, send_email])
GUARDED_CALLS = (("wire.send", {"to": "Initech", "amount": 9000}),
                 ("payment.send", {"to": "Globex", "amount": 120}),
                 ("email.send", {"to": "ceo@acme.example", "subject": "Paid"}))


def _script(request: ModelRequest) -> ModelResponse:
    done = results_since_last_user(request)
    if done:
        return text("Done: " + "; ".join(f"{r.tool}: {r.content[:70]}" for r in done))
    return tool_calls(*GUARDED_CALLS, text="Wiring, paying and emailing.")


model = ScriptedModel(_script, model="scripted-guarded-desk")
