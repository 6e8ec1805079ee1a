"""A side-effecting plugin and a scripted model for the durability tests, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.support.ledger:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.ledger:model
    DAGENT_TEST_LEDGER=/abs/path/ledger.jsonl

Every line of the ledger file is a JSON object with `kind`, `key` (the call's idempotency key), `pid` (the
worker process that wrote it) and the tool's input:

- `ledger.charge` (needs approval) writes a `charge.attempt` line every time it runs, and a `charge` line
  (the effect) only if no `charge` line with its key exists yet: the idempotent-effect pattern a real
  side-effecting tool uses (check-and-append under an exclusive file lock).
- `ledger.note` (no approval) writes a `note` line every time it runs: a raw execution count.

The model calls `ledger.note` then `ledger.charge` in round 1 (for `BATCH_INPUT`: three charges, then a
note), and in round 2 summarises the results.
Results never contain pids, keys or times, so two runs of the same prompt give equal outputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from tests.support.jsonl import append_line, read_lines

LEDGER_ENV = "DAGENT_TEST_LEDGER"
CHARGE_AMOUNT = 42.5
NOTE_TEXT = "about to charge"
BATCH_INPUT = "Charge three amounts, then note it."  # a batch of three approvals, then a call after it
BATCH_AMOUNTS = (10.0, 20.0, 30.0)


def ledger_path() -> Path:
    path = os.environ.get(LEDGER_ENV)
    if not path:
        raise RuntimeError(f"{LEDGER_ENV} is not set: the ledger tools need a file to write to")
    return Path(path)


def read_ledger(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every line of a ledger file (an empty list if it does not exist yet)."""
    return read_lines(path)


def _append(record: dict[str, Any], *, unless_kind_and_key_exist: bool = False) -> bool:
    return append_line(ledger_path(), record, unless_kind_and_key_exist=unless_kind_and_key_exist)


class ChargeInput(BaseModel):
    amount: float = Field(gt=0, description="Amount to charge, in US dollars")


class NoteInput(BaseModel):
    text: str


@tool("ledger.charge", approval=Approval(reason="Charging money requires approval."))
async def charge(args: ChargeInput, ctx: ToolContext) -> dict[str, object]:
    """Charge an amount, exactly once per tool call (keyed by the call's idempotency key)."""
    base = {"key": ctx.idempotency_key, "pid": os.getpid(), "amount": args.amount}
    _append({"kind": "charge.attempt", **base, "attempt": ctx.attempt})
    _append({"kind": "charge", **base}, unless_kind_and_key_exist=True)
    return {"status": "charged", "amount": args.amount}


@tool("ledger.note")
async def note(args: NoteInput, ctx: ToolContext) -> dict[str, object]:
    """Write a note into the ledger (every run writes a line)."""
    _append({"kind": "note", "key": ctx.idempotency_key, "pid": os.getpid(), "text": args.text})
    return {"noted": args.text}


plugin = Plugin("ledger", tools=[charge, note], instructions="You keep the ledger.")


def _script(request: ModelRequest) -> ModelResponse:
    results = results_since_last_user(request)
    user = next((m.text for m in request.messages if isinstance(m, UserMessage)), "")
    if not results and user == BATCH_INPUT:
        return tool_calls(*[("ledger.charge", {"amount": amount}) for amount in BATCH_AMOUNTS],
                          ("ledger.note", {"text": NOTE_TEXT}), text="Three charges, then a note.")
    if not results:
        return tool_calls(("ledger.note", {"text": NOTE_TEXT}), ("ledger.charge", {"amount": CHARGE_AMOUNT}),
                          text="Noting, then charging.")
    return text("Done. " + "; ".join(f"{r.tool}={'ERR' if r.is_error else 'OK'}:{r.content}" for r in results))


model = ScriptedModel(_script, model="scripted-ledger")
