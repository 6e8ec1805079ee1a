"""A conversation holds references to its earlier prompts, and a model round receives what it needs by value or
by reference: never by querying its workflow. Real dev server, real worker, real file store (a directory)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    HandleQueryInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from durable_agent.activities.history import read_history_link
from durable_agent.activities.transcripts import HistoryChain
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.models import Conversation, Prompt, TextOutput, ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient, ConversationHandle
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows import names
from durable_agent.workflows.protocol import ConversationRequest, PromptRequest, RoundInput, ToolThenModel
from tests.support.workers import TEST_SETTINGS

OUTPUT_BYTES = 4096
QUERIES: list[tuple[str, str]] = []  # (workflow type, query) of every query these tests' workers handled


class _QueryRecorder(Interceptor):
    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _RecordingInbound


class _RecordingInbound(WorkflowInboundInterceptor):
    async def handle_query(self, input: HandleQueryInput) -> Any:
        QUERIES.append((workflow.info().workflow_type, input.query))
        return await super().handle_query(input)


class NoArgs(BaseModel):
    pass


@tool("report.fetch", local=False)  # never local (fast tools): each call runs with the next round in one activity
async def fetch_report(args: NoArgs, ctx: ToolContext) -> str:
    """A large tool output: a report of OUTPUT_BYTES characters."""
    return ctx.prompt_id[-4:] * (OUTPUT_BYTES // 4)


report_plugin = Plugin("report", tools=[fetch_report])


def _script(request: ModelRequest) -> ModelResponse:
    """Round 1 fetches a report, round 2 answers with how many user messages and reports it can see."""
    if request.round == 1:
        return tool_calls(("report.fetch", {}))
    users = sum(isinstance(m, UserMessage) for m in request.messages)
    reports = sum(isinstance(m, ToolResultMessage) and len(m.content) >= OUTPUT_BYTES for m in request.messages)
    return text(f"{users} messages, {reports} reports")


async def _worker_client(env: WorkflowEnvironment, model: ScriptedModel,
                         file_dir: Path) -> tuple[Any, Any, AgentClient]:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}",
                                                "file_dir": str(file_dir)})
    runtime = build_runtime(settings, plugins=[report_plugin], providers={"normal": model, "high": model})
    worker = create_worker(env.client, runtime, task_queue=settings.task_queue, settings=settings,
                           interceptors=[_QueryRecorder()])
    return runtime, worker, AgentClient(env.client, settings)


def _prompt_queries() -> list[str]:
    return [query for workflow_type, query in QUERIES if workflow_type == names.PROMPT_WORKFLOW]


def _bytes(history: WorkflowHistory) -> int:
    return sum(event.ByteSize() for event in history.events)


def _bytes_per_turn(history: WorkflowHistory) -> list[int]:
    """Bytes of the conversation's events from one child prompt's start to the next one's."""
    starts = [i for i, e in enumerate(history.events)
              if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]
    return [sum(e.ByteSize() for e in history.events[a:b]) for a, b in itertools.pairwise(starts)]


def _round_inputs(history: WorkflowHistory) -> list[RoundInput]:
    """Every model round's input, those sent with a tool call to run first (`dagent.tool_then_model`) included."""
    inputs = []
    for e in history.events:
        if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        kind, data = e.activity_task_scheduled_event_attributes.activity_type.name, \
            e.activity_task_scheduled_event_attributes.input.payloads[0].data
        if kind == names.MODEL_ROUND_ACTIVITY:
            inputs.append(RoundInput.model_validate_json(data))
        elif kind == names.TOOL_THEN_MODEL_ACTIVITY:
            inputs.append(ToolThenModel.model_validate_json(data).round)
    return inputs


async def test_a_conversation_passes_references_and_its_bytes_grow_linearly(dev_env: WorkflowEnvironment,
                                                                           tmp_path: Path) -> None:
    QUERIES.clear()
    model = ScriptedModel(_script)
    turns = 10
    runtime, worker, client = await _worker_client(dev_env, model, tmp_path / "files")
    async with worker:
        conversation = await client.start_conversation(user_id="lin")
        prompts = []
        for turn in range(1, turns + 1):
            prompt = await conversation.send(f"turn {turn}")
            await (await conversation.prompt_started(prompt.id)).result()
            prompts.append(prompt)
        final = await conversation.close()
        conversation_history = await dev_env.client.get_workflow_handle(conversation.id).fetch_history()
        last = await prompts[-1].result()
        histories = [await p.workflow.fetch_history() for p in prompts]
    assert final.prompt_ids == [p.id for p in prompts]
    # The last prompt's model saw every earlier prompt, its report included.
    assert last.output[-1].text == f"{turns} messages, {turns} reports"  # type: ignore[union-attr]
    assert _prompt_queries() == []  # the test queries only the conversation (`prompt_started`); no round queries

    starts = [PromptRequest.model_validate_json(
        h.events[0].workflow_execution_started_event_attributes.input.payloads[0].data) for h in histories]
    assert all(not s.history for s in starts)  # no copies ...
    assert [s.history_ref.count if s.history_ref else 0 for s in starts] == list(range(turns))  # ... references
    start_sizes = [h.events[0].ByteSize() for h in histories]
    assert max(start_sizes) - min(start_sizes[1:]) < 100  # a prompt's input does not grow with the conversation

    # Each report is in its prompt's history as the tool's result and in the final record, never in a round's input.
    for history in histories:
        second_round = _round_inputs(history)[1]
        assert second_round.changes
        # The call ran in the same activity as the round (`dagent.tool_then_model`): the round's input holds the
        # entry still open, and the worker that ran the tool puts its result in.
        entry = second_round.changes[-1].output
        assert isinstance(entry, ToolOutput) and entry.result is None
        assert len(second_round.model_dump_json()) < OUTPUT_BYTES
        report = (history.workflow_id[-4:] * (OUTPUT_BYTES // 4)).encode()
        carrying = [EventType.Name(e.event_type) for e in history.events if report in e.SerializeToString()]
        # the tool's result: the completion of the activity that ran it (with the next round)
        assert carrying == ["EVENT_TYPE_ACTIVITY_TASK_COMPLETED", "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"]

    # The conversation's own history grows by the same amount every turn: linear, not quadratic. (Copies would
    # add a whole earlier record, over OUTPUT_BYTES, per turn per turn; a busy machine may split a turn's
    # work over more workflow tasks, a few hundred bytes.)
    steps = _bytes_per_turn(conversation_history)
    assert len(steps) == turns - 1
    assert max(steps[len(steps) // 2:]) <= max(steps[:len(steps) // 2]) + OUTPUT_BYTES // 4, steps
    assert runtime.transcripts.misses == 0


async def test_a_worker_without_the_transcript_gets_the_round_input_whole_never_by_query(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """In its third round, turn 3 makes the worker forget everything (as a restarted worker, or another one,
    would): the fourth round misses, the workflow sends that round whole, the earlier prompts load from the store.
    (Each call runs with the next round in one activity; the fourth round is the first whose changes do not start
    at the first entry, so the first that cannot be rebuilt from its input alone. Missing in that activity, the
    round is left to the workflow, whose round misses too and is sent whole.)"""
    QUERIES.clear()
    forget = asyncio.Event()
    runtime_box: list[Any] = []

    def script(request: ModelRequest) -> ModelResponse:
        if not forget.is_set():
            return _script(request)
        if request.round == 3:
            runtime_box[0].transcripts.clear()
        return tool_calls(("report.fetch", {})) if request.round <= 3 else _script(request)

    model = ScriptedModel(script)
    runtime, worker, client = await _worker_client(dev_env, model, tmp_path / "files")
    runtime_box.append(runtime)
    async with worker:
        conversation = await client.start_conversation(user_id="miss")
        for turn in (1, 2):
            await (await conversation.prompt_started((await conversation.send(f"turn {turn}")).id)).result()
        forget.set()
        loads_before = runtime.transcripts.history.loads
        third = await conversation.send("turn 3")
        record = await (await conversation.prompt_started(third.id)).result()
        history = await third.workflow.fetch_history()
        await conversation.close()
    assert record.output[-1].text == "3 messages, 5 reports"  # type: ignore[union-attr]
    failures = [e.activity_task_failed_event_attributes.failure.application_failure_info.type
                for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failures == [names.TRANSCRIPT_MISSING_ERROR]
    rounds = _round_inputs(history)
    assert [(r.round, r.changes is None) for r in rounds] == [
        (1, False), (2, False), (3, False), (4, False), (4, False), (4, True)]  # the fourth round, at last whole
    assert runtime.transcripts.history.loads > loads_before  # earlier prompts: from the store, not a query
    assert _prompt_queries() == []


async def test_a_stored_history_link_names_its_records(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """What a child prompt's reference points at is the earlier prompts' records, readable from the store."""
    model = ScriptedModel(_script)
    runtime, worker, client = await _worker_client(dev_env, model, tmp_path / "files")
    async with worker:
        conversation = await client.start_conversation(user_id="links")
        first = await conversation.send("one")
        first_record = await (await conversation.prompt_started(first.id)).result()
        second = await conversation.send("two")
        await (await conversation.prompt_started(second.id)).result()
        start = (await second.workflow.fetch_history()).events[0]
        await conversation.close()
    payload = start.workflow_execution_started_event_attributes.input.payloads[0]
    request = PromptRequest.model_validate_json(payload.data)
    assert request.history_ref is not None
    store = runtime.file_store
    records = (await HistoryChain().resolve(request.history_ref,
                                            lambda ref: read_history_link(store, ref, None))).records
    assert records == [first_record]


async def test_records_carried_by_value_from_an_older_run_are_stored_before_the_next_prompt(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """A run continued from one that passed copies (`history` by value) stores them first: its next prompt
    gets a reference to all of them, and its own continue-as-new carries no copies."""
    model = ScriptedModel(_script)
    _, worker, client = await _worker_client(dev_env, model, tmp_path / "files")
    older = [Prompt(id=f"old-{i}", user_id="mig", input=f"old turn {i}", state="completed",
                    output=[TextOutput(text=f"answer {i}")]) for i in range(3)]
    conversation_id = f"conv-mig-{uuid.uuid4().hex[:8]}"
    async with worker:
        handle = await dev_env.client.start_workflow(
            names.CONVERSATION_WORKFLOW, ConversationRequest(user_id="mig", history=older, prompts_per_run=1),
            id=conversation_id, task_queue=client.settings.task_queue, result_type=Conversation)
        conversation = ConversationHandle(handle, dev_env.client)
        prompt = await conversation.send("new turn")
        queued = await conversation.send("queued turn")  # waiting when the first run continues as new
        record = await (await conversation.prompt_started(prompt.id)).result()
        await (await conversation.prompt_started(queued.id)).result()
        start = (await prompt.workflow.fetch_history()).events[0]
        final = await conversation.close()
        runs = [e async for e in dev_env.client.list_workflows(f"WorkflowId = '{conversation_id}'")]
        carried = [await dev_env.client.get_workflow_handle(conversation_id, run_id=run.run_id).fetch_history()
                   for run in runs]
    assert record.output[-1].text == "4 messages, 1 reports"  # type: ignore[union-attr]
    payload = start.workflow_execution_started_event_attributes.input.payloads[0]
    request = PromptRequest.model_validate_json(payload.data)
    assert not request.history and request.history_ref is not None and request.history_ref.count == 3
    assert final.prompt_ids == [p.id for p in older] + [prompt.id, queued.id]
    continued = [ConversationRequest.model_validate_json(
        h.events[0].workflow_execution_started_event_attributes.input.payloads[0].data) for h in carried]
    second_run = next(r for r in continued if r.runs == 2)
    assert not second_run.history and second_run.history_ref is not None and second_run.history_ref.count == 4
    assert second_run.prompt_ids == final.prompt_ids[:4] and [q.prompt_id for q in second_run.queued] == [queued.id]


async def test_history_given_by_value_is_stored_once_and_rounds_reference_it(dev_env: WorkflowEnvironment,
                                                                              tmp_path: Path) -> None:
    """A caller's earlier prompts arrive with the prompt's input (once) and go to the store before round 1 with
    a local activity (not written to history again): no round input carries them."""
    model = ScriptedModel(_script)
    _, worker, client = await _worker_client(dev_env, model, tmp_path / "files")
    older = [Prompt(id=f"given-{i}", user_id="g", input=f"given turn {i}", state="completed",
                    output=[TextOutput(text=f"answer {i} " + "y" * 2000)]) for i in range(3)]
    async with worker:
        prompt = await client.start("now", user_id="g", history=older)
        record = await prompt.result()
        history = await prompt.workflow.fetch_history()
    assert record.output[-1].text == "4 messages, 1 reports"  # type: ignore[union-attr]
    rounds = _round_inputs(history)
    assert all(not r.history and r.history_ref is not None and r.history_ref.count == 3 for r in rounds)
    carrying = [EventType.Name(e.event_type) for e in history.events if b"y" * 2000 in e.SerializeToString()]
    assert carrying == ["EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"]  # the input only (the result has no history)


async def test_with_payload_encryption_the_stored_history_holds_no_plaintext(dev_env: WorkflowEnvironment,
                                                                             tmp_path: Path) -> None:
    """History links are Temporal payloads through the worker's codec, like everything in history."""
    key = base64.b64encode(b"7" * 32).decode()
    settings = TEST_SETTINGS.model_copy(update={
        "task_queue": f"tq-{uuid.uuid4().hex[:10]}", "file_dir": str(tmp_path / "files"),
        "payload_dir": str(tmp_path / "payloads"), "codec_keys": SecretStr(f"k1:{key}")})
    runtime = build_runtime(settings, plugins=[report_plugin], providers={"normal": ScriptedModel(_script)})
    encrypted = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                       plugins=[DurableAgentPlugin(settings)])
    async with create_worker(encrypted, runtime, task_queue=settings.task_queue):
        conversation = await AgentClient(encrypted, settings).start_conversation(user_id="enc")
        for turn in ("my secret plan", "and the next step"):
            await (await conversation.prompt_started((await conversation.send(turn)).id)).result()
        runtime.transcripts.clear()  # the next round reads the links back from the store, decrypting them
        last = await conversation.send("what now")
        record = await (await conversation.prompt_started(last.id)).result()
        await conversation.close()
    assert record.output[-1].text == "3 messages, 3 reports"  # type: ignore[union-attr]
    assert runtime.transcripts.history.loads >= 1  # read back and decrypted
    stored = [p.read_bytes() for p in (tmp_path / "files").rglob("*") if p.is_file()]
    assert stored and not any(b"my secret plan" in blob or b"next step" in blob for blob in stored)


async def test_a_round_input_does_not_grow_with_the_rounds_before_it(dev_env: WorkflowEnvironment,
                                                                     tmp_path: Path) -> None:
    """Only what changed since the last round: no list that grows every round (model rounds, audit) rides along."""

    def many_rounds(request: ModelRequest) -> ModelResponse:
        return tool_calls(("report.fetch", {})) if request.round < 25 else text("done")

    _, worker, client = await _worker_client(dev_env, ScriptedModel(many_rounds), tmp_path / "files")
    async with worker:
        prompt = await client.start("go", max_rounds=30)
        record = await prompt.result()
        history = await prompt.workflow.fetch_history()
    assert len(record.model_rounds) == 25
    sizes = [len(r.model_dump_json()) for r in _round_inputs(history)]
    assert len(sizes) == 25 and max(sizes[2:]) - min(sizes[2:]) < 100, sizes
