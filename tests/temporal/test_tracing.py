"""Tracing end to end on a real dev server: spans from the OTel SDK's in-memory exporter on temporalio's
replay-safe tracer provider, with the SDK's OpenTelemetryPlugin on the client and its workers."""

from __future__ import annotations

import io
import json
import logging
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from bench.spans import (
    SpanRecord,
    ancestry,
    assert_no_duplicates,
    finished_spans,
    memory_exporter,
    of_trace,
    parent_of,
    render_tree,
)
from durable_agent.agent.logging import configure_logging
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.worker import build_runtime, create_worker
from tests import scenarios
from tests.support.workers import TEST_SETTINGS

PRICES = '{"scripted": {"input": 1.0, "output": 2.0}}'  # USD per million tokens


async def traced_client(env: WorkflowEnvironment) -> Client:
    memory_exporter()
    return await Client.connect(env.client.service_client.config.target_host, namespace=env.client.namespace,
                                plugins=[DurableAgentPlugin(TEST_SETTINGS), OpenTelemetryPlugin()])


@asynccontextmanager
async def traced_worker(env: WorkflowEnvironment, *, trace_content: bool = False) -> AsyncIterator[AgentClient]:
    client = await traced_client(env)
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}",
                                                "trace_content": trace_content, "prices": PRICES})
    runtime = build_runtime(settings, plugins=[scenarios.plugin],
                            providers={"normal": scenarios.model, "high": scenarios.model})
    async with create_worker(client, runtime, task_queue=settings.task_queue):
        yield AgentClient(client, settings)


def only(spans: list[SpanRecord], name: str) -> SpanRecord:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"expected one {name!r}, got {len(found)}:\n{render_tree(spans)}"
    return found[0]


def named(spans: list[SpanRecord], name: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == name]


def invocation(spans: list[SpanRecord]) -> SpanRecord:
    """The prompt's span, `invoke_agent {task queue}` by the GenAI agent conventions."""
    found = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert len(found) == 1, render_tree(spans)
    assert found[0].name == f"invoke_agent {found[0].attributes['gen_ai.agent.name']}"
    assert found[0].attributes["gen_ai.operation.name"] == "invoke_agent"
    return found[0]


async def run_approval_prompt(agent: AgentClient, text: str = "approval please") -> tuple[str, str]:
    """Runs a prompt whose tool call waits for alice's approval; returns its id and trace id."""
    handle = await agent.start(text, user_id="tracer")
    await handle.wait_until("waiting_for_approval")
    [pending] = await handle.pending_approvals()
    await handle.approve(pending.tool_call_id, by="alice")
    prompt = await handle.result()
    assert prompt.state == "completed", prompt.error
    assert prompt.trace_id, "the prompt record carries its trace id"
    return prompt.id, prompt.trace_id


async def test_one_trace_per_prompt_with_tool_and_approval(dev_env: WorkflowEnvironment) -> None:
    async with traced_worker(dev_env) as agent:
        prompt_id, trace_id = await run_approval_prompt(agent)
        handle = agent.prompt(prompt_id)
    every = finished_spans()
    spans = of_trace(every, trace_id)
    tree = render_tree(spans)
    assert_no_duplicates(spans)
    prompt_spans = [s for s in every if s.attributes.get("dagent.prompt.id") == handle.id]
    assert {s.trace_id for s in prompt_spans} == {trace_id}, "every span of the prompt is in its one trace"

    root = only(spans, "dagent.prompt.start")
    assert root.parent_id is None
    prompt = invocation(spans)
    assert prompt.parent_id == root.span_id
    assert prompt.attributes["dagent.prompt.state"] == "completed"
    rounds = named(spans, "dagent.round")
    assert sorted(r.attributes["dagent.round"] for r in rounds) == [1, 2], tree
    assert all(r.parent_id == prompt.span_id for r in rounds), tree
    chats = named(spans, "chat scripted")
    assert len(chats) == 2 and {parent_of(spans, c).span_id for c in chats} == {r.span_id for r in rounds}, tree
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["gen_ai.response.finish_reasons"] in (("tool_calls",), ("stop",))
        assert chat.attributes["dagent.usage.cost_usd"] > 0  # priced from the worker's price table
    call = only(spans, "dagent.tool_call")
    assert ancestry(spans, call)[1:] == ["dagent.round", prompt.name, "dagent.prompt.start"], tree
    assert call.attributes["dagent.tool.id"] == "demo.pay"
    assert call.attributes["dagent.tool.outcome"] == "success"
    approval = only(spans, "dagent.approval")
    assert approval.parent_id == call.span_id
    assert approval.attributes["dagent.approval.decision"] == "approved"
    assert approval.attributes["dagent.approval.decided_by"] == "alice"
    assert approval.attributes["dagent.approval.wait_seconds"] >= 0
    execution = only(spans, "execute_tool demo.pay")
    assert execution.parent_id == call.span_id
    assert execution.attributes["gen_ai.tool.call.id"] == call.attributes["dagent.tool.call_id"]
    assert execution.attributes["dagent.attempt"] == 1
    assert execution.attributes["dagent.tool.outcome"] == "success"

    texts = [v for s in spans for v in s.attributes.values() if isinstance(v, str)]
    assert not any("approval please" in t for t in texts), "no prompt text in span attributes by default"
    assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output")
                   for s in spans for k in s.attributes)

    # Replaying the whole history (a new worker picking the prompt up) exports nothing again.
    before = len(memory_exporter().get_finished_spans())
    history = await handle.workflow.fetch_history()
    await Replayer(workflows=[], plugins=[DurableAgentPlugin(TEST_SETTINGS), OpenTelemetryPlugin()]
                   ).replay_workflow(history)
    assert len(memory_exporter().get_finished_spans()) == before, "replay exported spans again"


async def test_prompt_text_recorded_only_when_turned_on(dev_env: WorkflowEnvironment) -> None:
    async with traced_worker(dev_env, trace_content=True) as agent:
        prompt = await agent.run("completed with text", user_id="tracer")
    spans = of_trace(finished_spans(), prompt.trace_id or "")
    chats = named(spans, "chat scripted")
    assert chats and "completed with text" in chats[0].attributes["gen_ai.input.messages"]
    assert "gen_ai.output.messages" in chats[-1].attributes


async def test_conversation_prompts_get_their_own_linked_traces(dev_env: WorkflowEnvironment) -> None:
    async with traced_worker(dev_env) as agent:
        conversation = await agent.start_conversation(user_id="tracer")
        prompts = []
        for text in ("completed first", "completed second"):
            sent = await conversation.send(text)
            prompts.append(await (await conversation.prompt_started(sent.id)).result())
        first, second = prompts
        await conversation.close()
    every = finished_spans()
    assert first.trace_id and second.trace_id and first.trace_id != second.trace_id
    turns = {s.span_id: s for s in every if s.name == "dagent.conversation.prompt"}
    for prompt in (first, second):
        spans = of_trace(every, prompt.trace_id or "")
        root = invocation(spans)
        assert root.attributes["gen_ai.conversation.id"] == prompt.conversation_id
        assert root.parent_id is None, "a conversation's prompt begins its own trace"
        [link] = root.links
        assert turns[link].attributes["dagent.prompt.id"] == prompt.id, "linked to the conversation's turn span"
        assert turns[link].trace_id != prompt.trace_id


async def test_the_cli_log_lines_carry_the_prompt_trace_id(dev_env: WorkflowEnvironment) -> None:
    """Our CLI's logging (JSON lines on stderr) renders the stdlib records of the worker's loggers."""
    captured = io.StringIO()
    real_stderr = sys.stderr
    sys.stderr = captured
    try:
        configure_logging("DEBUG", json=True)
    finally:
        sys.stderr = real_stderr
    root = logging.getLogger()
    try:
        async with traced_worker(dev_env) as agent:
            prompt = await agent.run("completed logs", user_id="tracer")
    finally:
        for handler in [h for h in root.handlers if type(h).__module__ == "durable_agent.agent.logging"]:
            root.removeHandler(handler)
        for name in ("", "durable_agent", "temporalio"):
            logging.getLogger(name).setLevel(logging.WARNING if not name else logging.NOTSET)
    lines = [json.loads(line) for line in captured.getvalue().splitlines() if line.startswith("{")]
    mine = [line for line in lines if line.get("prompt_id") == prompt.id]
    assert mine, f"no log lines for {prompt.id}: {lines[:3]}"
    assert {line.get("trace_id") for line in mine} == {prompt.trace_id}
    assert {"prompt started", "prompt finished"} <= {line["event"] for line in mine}
    assert all(line["level"] in ("debug", "info") and line["logger"].startswith("durable_agent") for line in mine)
