"""What one round costs in history: the tool activity's input holds only what the activity cannot derive,
and search attributes are upserted only when a value changes (issue 17). Real dev server, scripted model."""

from __future__ import annotations

import importlib
import json
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.protocol import ToolInvocation
from tests.support.workers import TEST_SETTINGS, agent_worker


class WhoInput(BaseModel):
    n: int
    approve: bool = False


@tool("who.am_i", approval=lambda args: Approval(reason="check") if args.approve else None)
async def who_am_i(args: WhoInput, ctx: ToolContext) -> dict[str, object]:
    """Report the identity the tool sees."""
    return {"n": args.n, "prompt_id": ctx.prompt_id, "user_id": ctx.user_id, "conversation_id": ctx.conversation_id,
            "idempotency_key": ctx.idempotency_key, "call": ctx.tool_call_id}


who_plugin = Plugin("who", tools=[who_am_i])


def _events(events: list[HistoryEvent], kind: EventType.ValueType) -> list[HistoryEvent]:
    return [e for e in events if e.event_type == kind]


def _scheduled(events: list[HistoryEvent]) -> list[tuple[str, dict[str, Any]]]:
    """Each scheduled activity's type and input, a round's only tool call and the next model round run together
    (`dagent.tool_then_model`) split into the two they stand for."""
    found: list[tuple[str, dict[str, Any]]] = []
    for e in _events(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED):
        kind = e.activity_task_scheduled_event_attributes.activity_type.name
        data = json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        if kind == "dagent.tool_then_model":
            found += [("dagent.invoke_tool", data["call"]), ("dagent.model_round", data["round"])]
        else:
            found.append((kind, data))
    return found


def _tool_inputs(events: list[HistoryEvent]) -> list[dict[str, object]]:
    return [data for kind, data in _scheduled(events) if kind == "dagent.invoke_tool"]


def _results(events: list[HistoryEvent], activity_type: str) -> list[dict[str, object]]:
    names = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
             for e in _events(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)}
    found: list[dict[str, object]] = []
    for e in _events(events, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED):
        data = json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)
        kind = names[e.activity_task_completed_event_attributes.scheduled_event_id]
        if kind == "dagent.tool_then_model":
            found += [data[part] for part, stands_for in (("tool", "dagent.invoke_tool"),
                                                          ("round", "dagent.model_round"))
                      if stands_for == activity_type and part in data]
        elif kind == activity_type:
            found.append(data)
    return found


def _upserts(events: list[HistoryEvent]) -> list[dict[str, str]]:
    """The workflow's own upserts (not the SDK's `TemporalChangeVersion` one that comes with each patch marker)."""
    found = []
    for event in _events(events, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES):
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        if set(fields) != {"TemporalChangeVersion"}:
            found.append({key: json.loads(payload.data) for key, payload in fields.items()})
    return found


def _round_inputs(events: list[HistoryEvent]) -> list[dict[str, Any]]:
    return [data for kind, data in _scheduled(events) if kind == "dagent.model_round"]


def _at_defaults(data: dict[str, Any], keep: frozenset[str] = frozenset()) -> list[str]:
    """Fields of a payload written to history that say nothing (null, empty, zero, false)."""
    return [key for key, value in data.items() if key not in keep and value in (None, [], {}, 0, False, "")]


async def _history(handle: PromptHandle) -> list[HistoryEvent]:
    return list((await handle.workflow.fetch_history()).events)


async def test_tool_input_carries_each_id_once_and_no_policy_fields(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([tool_calls(("who.am_i", {"n": 1})), text("done")])
    async with agent_worker(dev_env, plugins=[who_plugin], model=model) as client:
        handle = await client.start("who?", user_id="u1", prompt_id="lean-input-1")
        prompt = await handle.result()
        events = await _history(handle)
        run_id = (await handle.workflow.describe()).run_id
    [sent] = _tool_inputs(events)
    # The prompt's reference (agent/models.py PromptRef, flat) once, then the call: no policy field, no default.
    assert sent == {"prompt_id": "lean-input-1", "user_id": "u1", "id": "call_r1_0", "tool": "who.am_i",
                    "plugin": "who", "input": {"n": 1}}
    # Results too leave their defaults off: no empty side outputs, no unchanged plugin state, no null fields.
    [tool_result] = _results(events, "dagent.invoke_tool")
    assert set(tool_result) == {"result"}
    first_round, last_round = _results(events, "dagent.model_round")
    assert first_round["next"]["kind"] == "run_tools"  # type: ignore[index]
    assert [set(call) for call in first_round["next"]["calls"]] == [{"kind", "id", "tool", "input", "plugin"}]  # type: ignore[index]
    # A final answer without data is the default step: no `next` at all.
    assert not {"reasoning", "next", "plugin_state", "fallback", "settings"} & set(last_round)
    # The client started it with PromptState=running and UserId=u1: the only upsert is the final state.
    assert _upserts(events) == [{"PromptState": "completed"}]
    # The workflow's input and each model round's input (its prompt header, usage and changed outputs) carry
    # no field at its default either; `changes=[]` (nothing changed) is not the default (None: send it whole).
    started = json.loads(events[0].workflow_execution_started_event_attributes.input.payloads[0].data)
    assert started.keys() >= {"input", "user_id"} and _at_defaults(started) == []
    rounds = _round_inputs(events)
    assert [len(sent_round["changes"]) for sent_round in rounds] == [0, 1]
    for sent_round in rounds:
        assert _at_defaults(sent_round, keep=frozenset({"changes"})) == []
        assert _at_defaults(sent_round["prompt"]) == [] and _at_defaults(sent_round["prompt"].get("usage", {})) == []
        assert [_at_defaults(change["output"]) for change in sent_round["changes"]] == [[]] * len(sent_round["changes"])
    assert rounds[1]["changes"][0]["output"]["type"] == "tool"  # the union's tag stays
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolSuccess)
    # What the activity derived (the prompt id and the idempotency key from the workflow id) reached the tool.
    assert entry.result.output == {"n": 1, "prompt_id": "lean-input-1", "user_id": "u1", "conversation_id": None,
                                   "idempotency_key": f"lean-input-1/{run_id}/call_r1_0", "call": "call_r1_0"}


async def test_conversation_and_prompt_ids_reach_the_tool_when_they_are_not_the_defaults(
        dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([tool_calls(("who.am_i", {"n": 2})), text("done")])
    async with agent_worker(dev_env, plugins=[who_plugin], model=model) as client:
        handle = await client.start("who?", user_id="u2", prompt_id="lean-input-2", conversation_id="conv-9")
        prompt = await handle.result()
        events = await _history(handle)
    [sent] = _tool_inputs(events)
    assert (sent["prompt_id"], sent["user_id"], sent["conversation_id"]) == ("lean-input-2", "u2", "conv-9")
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolSuccess)
    assert isinstance(entry.result.output, dict) and entry.result.output["conversation_id"] == "conv-9"
    # Started with PromptState, UserId and ConversationId: the only upsert is the final state.
    assert _upserts(events) == [{"PromptState": "completed"}]


def _patch_events(events: list[HistoryEvent]) -> tuple[list[str], int]:
    """The patch ids of the marker events, and how many `TemporalChangeVersion` upserts came with them."""
    markers = [json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
               for e in _events(events, EventType.EVENT_TYPE_MARKER_RECORDED)
               if e.marker_recorded_event_attributes.marker_name == "core_patch"]
    versions = sum(1 for e in _events(events, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
                   if "TemporalChangeVersion" in e.upsert_workflow_search_attributes_event_attributes
                   .search_attributes.indexed_fields)
    return markers, versions


async def test_a_prompt_started_with_a_version_writes_no_patch_markers(dev_env: WorkflowEnvironment) -> None:
    """AgentClient names the current workflow version in the input: no marker and no TemporalChangeVersion
    upsert per patch. A request without a version (a raw client) decides by markers: at the 0.1.0 baseline there
    is no patch, so it writes none either."""
    model = ScriptedModel([tool_calls(("who.am_i", {"n": 5})), text("done"),
                           tool_calls(("who.am_i", {"n": 6})), text("done")])
    async with agent_worker(dev_env, plugins=[who_plugin], model=model) as client:
        versioned = await client.start("who?", prompt_id=f"versioned-{uuid.uuid4().hex[:6]}")
        assert (await versioned.result()).state == "completed"
        unversioned = await client.start("who?", prompt_id=f"unversioned-{uuid.uuid4().hex[:6]}",
                                         workflow_version=None)
        assert (await unversioned.result()).state == "completed"
        assert _patch_events(await _history(versioned)) == ([], 0)
        markers, version_upserts = _patch_events(await _history(unversioned))
    assert (markers, version_upserts) == ([], 0)


async def test_search_attributes_are_upserted_only_when_they_change(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([tool_calls(("who.am_i", {"n": 3})), tool_calls(("who.am_i", {"n": 4, "approve": True})),
                           text("done")])
    async with agent_worker(dev_env, plugins=[who_plugin], model=model) as client:
        handle = await client.start("who?", user_id="u3")
        await handle.wait_until("waiting_for_approval")
        [pending] = await handle.pending_approvals()
        await handle.approve(pending.tool_call_id, by="alice")
        prompt = await handle.result()
        events = await _history(handle)
    assert prompt.state == "completed"
    assert _upserts(events) == [{"PromptState": "waiting_for_approval"}, {"PromptState": "running"},
                                {"PromptState": "completed"}]


def test_tool_input_leaves_defaults_off_the_wire() -> None:
    lean = ToolInvocation(prompt_id="p", user_id="u", id="c", tool="t", input={"a": 1})
    assert json.loads(lean.model_dump_json()) == {"prompt_id": "p", "user_id": "u", "id": "c", "tool": "t",
                                                  "input": {"a": 1}}
    full = ToolInvocation(prompt_id="p", user_id="u", conversation_id="c0", id="c", tool="t", plugin="p",
                          max_attempts=2, plugin_state={"x": 1})
    assert ToolInvocation.model_validate_json(full.model_dump_json()) == full


async def test_a_prompt_started_next_to_its_worker_starts_eagerly(dev_env: WorkflowEnvironment) -> None:
    """The client runs a worker for the queue (same client): the first workflow task comes in the start reply."""
    model = ScriptedModel([text("hi")])
    async with agent_worker(dev_env, plugins=[who_plugin], model=model) as client:
        handle = await client.start("hello")
        await handle.result()
        events = await _history(handle)
    assert events[0].workflow_execution_started_event_attributes.eager_execution_accepted


async def test_sandbox_on_runs_prompts_without_reimporting_our_modules(
        dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    """DAGENT_WORKFLOW_SANDBOX=on: each workflow run gets a fresh sandbox, but our modules are passed through,
    so a prompt imports none of them again (the import hook below records every module created)."""
    created: list[str] = []
    init_module_attrs = importlib._bootstrap._init_module_attrs  # type: ignore[attr-defined]

    def record(spec: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
        created.append(spec.name)
        return init_module_attrs(spec, module, *args, **kwargs)

    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "workflow_sandbox": "on"})
    model = ScriptedModel([tool_calls(("who.am_i", {"n": 5})), text("done")])
    runtime = build_runtime(settings, plugins=[who_plugin], providers={"normal": model, "high": model})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])
    async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings):
        agent = AgentClient(client, settings)
        await agent.run("warm up")  # the first run may import what nothing imported before
        monkeypatch.setattr(importlib._bootstrap, "_init_module_attrs", record)
        prompt = await agent.run("who?", user_id="u5")
    assert prompt.state == "completed"
    assert [m for m in created if m.split(".")[0] == "durable_agent"] == []
