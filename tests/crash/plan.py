"""The kill plan and the prompts it tracks: seeded targets and delays, and comparing outputs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from durable_agent.agent.models import Prompt, ToolOutput
from durable_agent.client import PromptHandle
from tests.crash.constants import DEFAULT_PACE, REFILL_SHARE, TARGETS, Target

# --------------------------------------------------------------------------------------------------
# prompts


@dataclass
class Tracked:
    index: int
    handle: PromptHandle
    reference: bool
    started: float
    state: str = "starting"
    first_pending: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    steered: bool = False
    result: Prompt | None = None
    finished: float | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        return self.result is None and self.error is None


@dataclass(frozen=True)
class KillPlan:
    target: str
    delay: float  # after the previous restart, before looking for the target phase
    offset: float  # after the target phase was seen
    downtime: float  # killed -> restart begins
    pick: float  # which ready worker is the victim (position in start order)
    refill: bool  # worker target: first wait until at most one replacement is still starting


def kill_plan(seed: int, kills: int, target: Target, pace: float = DEFAULT_PACE) -> list[KillPlan]:
    rng = random.Random(seed)
    max_down = 0.3 if target == "worker" else 1.0
    return [KillPlan(target=rng.choice(TARGETS), delay=rng.uniform(0.05, pace), offset=rng.uniform(0.0, 0.06),
                     downtime=rng.uniform(0.0, max_down), pick=rng.random(), refill=rng.random() < REFILL_SHARE)
            for _ in range(kills)]


TIMEOUT_MARK = "activity StartToClose timeout"


def retries_exhausted(prompt: Prompt) -> str | None:
    """How `prompt` ran out of retries (a model call: the prompt failed; a tool call: its result), or None."""
    if prompt.state == "failed" and TIMEOUT_MARK in (prompt.error or ""):
        return f"model call out of attempts, prompt failed after round {prompt.rounds}: {prompt.error}"
    for entry in prompt.output:
        if isinstance(entry, ToolOutput) and TIMEOUT_MARK in str(getattr(entry.result, "error", "")):
            return f"tool call {entry.id} ({entry.tool}) out of attempts: {entry.result!r:.200}"
    return None


def pid_of(identity: str) -> int | None:
    head = identity.split("@", 1)[0]
    return int(head) if head.isdigit() else None


async def quietly(awaitable: Awaitable[Any], seconds: float) -> Any:
    """The awaitable's result, or None if it failed or took longer than `seconds` (worker/server down)."""
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except Exception:
        return None
