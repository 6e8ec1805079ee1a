"""A slow model for the model-heartbeat test (a test double of an LLM provider that is slow to answer): the first
attempt of round 1 waits two minutes, as a provider stuck on a long generation would; every attempt is written to
the ledger with the worker's pid."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from temporalio import activity

from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text


async def _answer(request: ModelRequest) -> ModelResponse:
    attempt = activity.info().attempt
    with Path(os.environ["DAGENT_TEST_LEDGER"]).open("a") as ledger:  # noqa: ASYNC230
        ledger.write(json.dumps({"attempt": attempt, "pid": os.getpid(), "round": request.round}) + "\n")
    if request.round == 1 and attempt == 1:
        await asyncio.sleep(120)
    return text(f"answered on attempt {attempt}")


model = ScriptedModel(_answer)
plugin = Plugin("slow-model")
