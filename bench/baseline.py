"""The baseline: a minimal hand-rolled agent loop on Temporal, as one would write it without a framework.

Each round runs one model activity that receives the whole transcript as its input, then one activity per
tool call; a call that needs approval sets the ``PromptState`` search attribute (so waiting prompts can be
listed) and waits for an ``approve`` signal first. A conversation is a new workflow per turn whose input
carries the earlier turns' transcript (``history``), as the previous turn returned it. Same scripted model
logic and same trivial tool as the Durable Agent side (``bench.scenario``), same pydantic data converter and
the SDK's default worker options (sandboxed workflow runner, 1,000 cached workflows).

Run a worker with ``python -m bench.baseline --address HOST:PORT --task-queue Q`` (until SIGTERM). With
``BENCH_OPENAI_BASE_URL`` set, its model activity calls that OpenAI Responses endpoint instead (``bench.realistic``:
the same real model for both sides), unstreamed, as a hand-rolled loop would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from bench.scenario import TOOL_ID, Scenario, current_turn, next_step, tool_output

WORKFLOW_NAME = "BaselineWorkflow"
# The same Keyword attribute the dev server registers for the project, so that waiting prompts can be
# listed (and counted by the benchmark) the way any real implementation would have to offer.
PROMPT_STATE = SearchAttributeKey.for_keyword("PromptState")


class Message(BaseModel):
    role: Literal["user", "assistant", "tool_call", "tool_result"]
    content: str = ""
    call_id: str = ""
    arguments: dict[str, int | bool] = Field(default_factory=dict)


class BaselineInput(BaseModel):
    input: str
    max_rounds: int
    history: list[Message] = Field(default_factory=list, description="Earlier turns of a conversation, whole.")


class ToolCall(BaseModel):
    id: str
    arguments: dict[str, int | bool]


class ModelInput(BaseModel):
    transcript: list[Message]
    round: int


class ModelOutput(BaseModel):
    text: str | None = None
    calls: list[ToolCall] = Field(default_factory=list)


class BaselineState(BaseModel):
    state: Literal["running", "waiting_for_approval", "completed"]
    rounds: int
    transcript: list[Message]


OPENAI_BASE_URL = os.environ.get("BENCH_OPENAI_BASE_URL")
_openai: Any = None


async def _openai_model(inp: ModelInput) -> ModelOutput:
    """One call to the OpenAI Responses API with the whole transcript, as a hand-rolled loop makes it."""
    global _openai
    if _openai is None:
        from openai import AsyncOpenAI

        _openai = AsyncOpenAI(base_url=OPENAI_BASE_URL, api_key="sk-bench", timeout=300)
    items: list[dict[str, Any]] = []
    for m in inp.transcript:
        if m.role in ("user", "assistant"):
            items.append({"role": m.role, "content": m.content})
        elif m.role == "tool_call":
            items.append({"type": "function_call", "call_id": m.call_id, "name": TOOL_ID,
                          "arguments": json.dumps(m.arguments)})
        else:
            items.append({"type": "function_call_output", "call_id": m.call_id, "output": m.content})
    tool = {"type": "function", "name": TOOL_ID, "description": "Return size bytes of text.",
            "parameters": {"type": "object", "properties": {"seq": {"type": "integer"}, "size": {"type": "integer"},
                                                            "approve": {"type": "boolean"}}}}
    response = await _openai.responses.create(model="paced-model", input=items, tools=[tool])
    calls = [ToolCall(id=item.call_id, arguments=json.loads(item.arguments))
             for item in response.output if item.type == "function_call"]
    return ModelOutput(text=response.output_text or None, calls=calls)


@activity.defn(name="baseline.model")
async def model_activity(inp: ModelInput) -> ModelOutput:
    if OPENAI_BASE_URL:
        return await _openai_model(inp)
    user, done = current_turn(inp.transcript, lambda m: m.role == "user", lambda m: m.role == "tool_result")
    step = next_step(Scenario.parse(user.content if user else None), done)
    if step.arguments is None:
        return ModelOutput(text=step.text)
    return ModelOutput(calls=[ToolCall(id=f"call_r{inp.round}_{i}", arguments=arguments)
                              for i, arguments in enumerate(step.calls)])


@activity.defn(name="baseline.tool")
async def tool_activity(call: ToolCall) -> str:
    if call.arguments.get("ms"):
        await asyncio.sleep(int(call.arguments["ms"]) / 1000)
    return tool_output(int(call.arguments["seq"]), int(call.arguments["size"]))


@workflow.defn(name=WORKFLOW_NAME)
class BaselineWorkflow:
    @workflow.init
    def __init__(self, inp: BaselineInput) -> None:
        self.transcript = [*inp.history, Message(role="user", content=inp.input)]
        self.state: Literal["running", "waiting_for_approval", "completed"] = "running"
        self.rounds = 0
        self.approved: set[str] = set()

    @workflow.run
    async def run(self, inp: BaselineInput) -> list[Message]:
        for round_number in range(1, inp.max_rounds + 1):
            self.rounds = round_number
            out = await workflow.execute_activity(
                model_activity, ModelInput(transcript=self.transcript, round=round_number),
                start_to_close_timeout=timedelta(minutes=5))
            if out.text:
                self.transcript.append(Message(role="assistant", content=out.text))
            if not out.calls:
                break
            for call in out.calls:
                self.transcript.append(Message(role="tool_call", call_id=call.id, arguments=call.arguments))
                if call.arguments.get("approve"):
                    self.state = "waiting_for_approval"
                    workflow.upsert_search_attributes([PROMPT_STATE.value_set(self.state)])
                    await workflow.wait_condition(lambda call_id=call.id: call_id in self.approved)
                    self.state = "running"
                    workflow.upsert_search_attributes([PROMPT_STATE.value_set(self.state)])
                result = await workflow.execute_activity(
                    tool_activity, call, start_to_close_timeout=timedelta(minutes=1))
                self.transcript.append(Message(role="tool_result", call_id=call.id, content=result))
        self.state = "completed"
        return self.transcript

    @workflow.signal
    def approve(self, call_id: str) -> None:
        self.approved.add(call_id)

    @workflow.query
    def get_state(self) -> BaselineState:
        return BaselineState(state=self.state, rounds=self.rounds, transcript=self.transcript)


async def _serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=[BaselineWorkflow],
                      activities=[model_activity, tool_activity]):
        print(f"baseline worker on {address} queue={task_queue}", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()
    asyncio.run(_serve(args.address, args.task_queue))


if __name__ == "__main__":
    main()
