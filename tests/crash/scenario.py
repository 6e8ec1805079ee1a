"""The crash harness's plugin and scripted model, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.crash.scenario:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.crash.scenario:model
    DAGENT_CRASH_DIR=/abs/dir          # ledger.jsonl and journal.jsonl are written here

A prompt's input names its plan: `[crash #7] ...` runs `plan_for(7)`, a fixed list of rounds. Every round but
the last calls tools; the last answers with text that quotes every tool result the model has seen, so a
lost, duplicated or reordered tool result changes the output. Everything the model and the tools return is
a function of the request alone (round number, messages), never of time, pid or attempt, so a run with
crashes must produce exactly the output of a crash-free run.

Timing, so that random kills land inside calls: a model call sleeps 150-400 ms and a tool call 50-300 ms.

Files (one JSON object per line):

- `journal.jsonl`: `{"ev": "start"|"end", "kind": "model"|"crash.lookup"|"crash.charge", "key", "pid", "t"}`
  around every model call and tool run. A start without an end from a killed pid was interrupted by the kill.
- `ledger.jsonl`: side effects. `crash.charge` (needs approval) writes `charge.attempt` on every run and
  `charge` (the effect) only if no `charge` line with its idempotency key exists yet (check-and-append under
  an exclusive lock, fsynced); it sleeps both before and after the effect, so a kill can land between the
  effect and the activity's completion. `crash.lookup` writes a `lookup` line on every run (a raw count).

Usage is explicit and constant: every model call reports `CALL_USAGE`, so a completed prompt's usage is
exactly `rounds x CALL_USAGE`; a model call counted twice (or lost) shows.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import zlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.models import Usage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import FatalModelError
from durable_agent.agent.providers.scripted import ScriptedModel, tool_calls
from durable_agent.agent.tools import Approval, tool
from tests.support.jsonl import append_line

CRASH_DIR_ENV = "DAGENT_CRASH_DIR"
LEDGER_FILE = "ledger.jsonl"
JOURNAL_FILE = "journal.jsonl"
MODEL_NAME = "scripted-crash"
CALL_USAGE = Usage(input_tokens=10, output_tokens=1, model_calls=1)
PROMPT_TAG = re.compile(r"\[crash #(\d+)\]")
# A killed tool call is retried after its start-to-close timeout (this) rather than the 20 s heartbeat
# timeout; the tools take at most 0.3 s. Both tools are idempotent, so they may be retried: each call gets
# TOOL_ATTEMPTS + 2 (workflows/prompt/tool_runner.py INFRASTRUCTURE_ATTEMPTS) attempts, and every attempt lost to a kill
# uses one up. With the default max_attempts=1 (3 attempts) a call hit by 3 kills in a row would end as
# "Tool call failed: activity StartToClose timeout".
TOOL_TIMEOUT = timedelta(seconds=4)
TOOL_ATTEMPTS = 5


# --- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    tool: str
    args: dict[str, Any]
    approve: bool = True  # for charges: what the harness decides


def plan_for(index: int) -> list[list[Call]]:
    """The tool rounds of prompt `index` (the model adds one final text round).

    3 or 4 rounds; every prompt has one approved charge, every second prompt a second charge (in round 1),
    of which every second one is rejected.
    """
    rounds: list[list[Call]] = [[Call("crash.lookup", {"item": f"p{index}-a"}),
                                 Call("crash.lookup", {"item": f"p{index}-b"})]]
    if index % 2 == 1:
        rounds[0].append(Call("crash.charge", {"amount": float(index + 1)}, approve=index % 4 == 1))
    if index % 3 == 2:
        rounds.append([Call("crash.lookup", {"item": f"p{index}-c"})])
    rounds.append([Call("crash.lookup", {"item": f"p{index}-d"}),
                   Call("crash.charge", {"amount": 10.0 + index})])
    return rounds


def prompt_input(index: int) -> str:
    return f"[crash #{index}] Look the items up, then charge the customer."


def expected_rounds(index: int) -> int:
    return len(plan_for(index)) + 1


def call_id(round_number: int, position: int) -> str:
    """The id the scripted model gives the `position`-th call of `round_number` (`ScriptedModel`'s scheme)."""
    return f"call_r{round_number}_{position}"


def charges(index: int) -> list[tuple[str, Call]]:
    """(tool call id, call) of every charge in prompt `index`'s plan."""
    return [(call_id(r, i), call) for r, calls in enumerate(plan_for(index), start=1)
            for i, call in enumerate(calls) if call.tool == "crash.charge"]


def steered_call(index: int) -> str | None:
    """The call whose approval wait the harness answers with a steer instead of a decision: the rejected
    charge of round 1 (every fourth prompt). A steer supersedes the pending call (it is not run) and is
    delivered at the start of round 2; nothing else reaches the prompt meanwhile, so the output is the same
    in every run. (A steer *and* a decision sent together is a race: whichever the workflow sees first wins.)"""
    rejected = [cid for cid, call in charges(index) if not call.approve and cid.startswith(call_id(1, 0)[:-1])]
    return rejected[0] if rejected else None


def expected_usage(index: int) -> Usage:
    total = Usage()
    for _ in range(expected_rounds(index)):
        total = total + CALL_USAGE
    return total


# --- files ------------------------------------------------------------------------------------------


def crash_dir() -> Path:
    path = os.environ.get(CRASH_DIR_ENV)
    if not path:
        raise RuntimeError(f"{CRASH_DIR_ENV} is not set: the crash scenario needs a directory to write to")
    return Path(path)


def _journal(ev: str, kind: str, key: str) -> None:
    line = json.dumps({"ev": ev, "kind": kind, "key": key, "pid": os.getpid(), "t": time.time()}) + "\n"
    fd = os.open(crash_dir() / JOURNAL_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one O_APPEND write: lines from concurrent workers never interleave
    finally:
        os.close(fd)


def _ledger_append(record: dict[str, Any], *, unless_kind_and_key_exist: bool = False) -> bool:
    return append_line(crash_dir() / LEDGER_FILE, record, unless_kind_and_key_exist=unless_kind_and_key_exist)


def _spread(text: str, low_ms: int, high_ms: int) -> float:
    """A duration in [low, high] ms that depends only on `text`."""
    return (low_ms + zlib.crc32(text.encode()) % (high_ms - low_ms + 1)) / 1000


# --- tools ------------------------------------------------------------------------------------------


class LookupInput(BaseModel):
    item: str


class ChargeInput(BaseModel):
    amount: float = Field(gt=0)


@tool("crash.lookup", timeout=TOOL_TIMEOUT, max_attempts=TOOL_ATTEMPTS)
async def lookup(args: LookupInput, ctx: ToolContext) -> dict[str, object]:
    """Look an item up (read-only; every run writes a `lookup` ledger line)."""
    _journal("start", "crash.lookup", ctx.idempotency_key)
    await asyncio.sleep(_spread(args.item, 50, 300))
    _ledger_append({"kind": "lookup", "key": ctx.idempotency_key, "pid": os.getpid(), "attempt": ctx.attempt})
    _journal("end", "crash.lookup", ctx.idempotency_key)
    return {"item": args.item, "value": zlib.crc32(args.item.encode()) % 1000}


@tool("crash.charge", approval=Approval(reason="Charging money requires approval."), timeout=TOOL_TIMEOUT,
      max_attempts=TOOL_ATTEMPTS)
async def charge(args: ChargeInput, ctx: ToolContext) -> dict[str, object]:
    """Charge an amount, exactly once per tool call (keyed by the call's idempotency key)."""
    _journal("start", "crash.charge", ctx.idempotency_key)
    base = {"key": ctx.idempotency_key, "pid": os.getpid(), "amount": args.amount}
    _ledger_append({"kind": "charge.attempt", **base, "attempt": ctx.attempt})
    await asyncio.sleep(_spread(f"{args.amount}-before", 30, 150))
    _ledger_append({"kind": "charge", **base}, unless_kind_and_key_exist=True)
    await asyncio.sleep(_spread(f"{args.amount}-after", 30, 150))
    _journal("end", "crash.charge", ctx.idempotency_key)
    return {"status": "charged", "amount": args.amount}


plugin = Plugin("crash", tools=[lookup, charge], instructions="You process orders.")


# --- the model --------------------------------------------------------------------------------------


def _index_of(request: ModelRequest) -> int:
    for message in request.messages:
        if isinstance(message, UserMessage) and (found := PROMPT_TAG.search(message.text)):
            return int(found.group(1))
    raise FatalModelError("crash scenario: no '[crash #N]' tag in the user message")


def respond(request: ModelRequest) -> ModelResponse:
    """The deterministic answer to `request` (no sleeping, no journal): also used to predict outputs."""
    index = _index_of(request)
    plan = plan_for(index)
    if request.round <= len(plan):
        calls = plan[request.round - 1]
        response = tool_calls(*[(c.tool, dict(c.args)) for c in calls], round=request.round,
                              text=f"Round {request.round}: {', '.join(c.tool for c in calls)}.")
    else:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        summary = "; ".join(f"{r.call_id} {r.tool} {'ERR' if r.is_error else 'OK'} {r.content}" for r in results)
        response = ModelResponse(text=f"Done #{index} after {len(results)} results: {summary}")
    return response.model_copy(update={"usage": CALL_USAGE, "model": MODEL_NAME})


async def _script(request: ModelRequest) -> ModelResponse:
    key = f"{request.prompt_id}/r{request.round}"
    _journal("start", "model", key)
    response = respond(request)
    await asyncio.sleep(_spread(key.rsplit("-", 1)[-1], 150, 400))
    _journal("end", "model", key)
    return response


model = ScriptedModel(_script, model=MODEL_NAME)
