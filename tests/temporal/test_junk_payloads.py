"""The property-based guard: no generated payload, sent anywhere, can wedge a prompt or a conversation.

Hypothesis generates raw payload lists - none, one or several; JSON of any shape, including the right keys
with the wrong types and real call ids; huge strings; binary bytes; bytes under wrong or unknown encoding
metadata - and sends them through the raw SDK (a client with the SDK's default converter) to every
signal, update and query each workflow has (listed by the workflow itself, `__temporal_workflow_metadata`),
to names it does not have, and to the run input of both `PromptWorkflow` and `ConversationWorkflow`. The
targets are prompts in every state (running a tool, waiting for approval, finished) and conversations
(idle, closed). Afterwards no history holds a WorkflowTaskFailed event, every workflow is in a defined
state, and the valid actions still work: the waiting call is approved, the running tool finishes, the idle
conversation answers and closes.

Example count: `DAGENT_JUNK_EXAMPLES` (default 40, derandomized so CI is reproducible); a big run, e.g.
`DAGENT_JUNK_EXAMPLES=2000 pytest tests/temporal/test_junk_payloads.py`, draws fresh random examples each time.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateStage
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.workflows import names
from tests.support.workers import agent_worker

T = TypeVar("T")
EXAMPLES = int(os.environ.get("DAGENT_JUNK_EXAMPLES", "40"))
APPROVER = "alice"  # the only one who may decide the waiting call; generated payloads never say "alice"
RELEASE = asyncio.Event()  # lets the running prompt's tool finish (set at the end)
BUILTIN_QUERIES = ["__stack_trace", "__enhanced_stack_trace", "__temporal_workflow_metadata"]


class Amount(BaseModel):
    amount: int


@tool("junk.pay", approval=Approval(reason="Paying needs alice.", approvers=[APPROVER]))
async def pay(args: Amount, ctx: ToolContext) -> str:
    """Pay an amount (alice decides)."""
    return f"paid {args.amount}"


@tool("junk.hold", timeout=timedelta(minutes=5))
async def hold(args: Amount, ctx: ToolContext) -> str:
    """Run until the test lets go."""
    await RELEASE.wait()
    return f"held {args.amount}"


plugin = Plugin("junk", tools=[pay, hold])


def _script(request: ModelRequest) -> ModelResponse:
    first = next((m.text for m in request.messages if isinstance(m, UserMessage)), "")
    if request.round == 1 and first.startswith("pay"):
        return tool_calls(("junk.pay", {"amount": 500}))
    if request.round == 1 and first.startswith("hold"):
        return tool_calls(("junk.hold", {"amount": 1}))
    return text(f"done after round {request.round}")


model = ScriptedModel(_script)


# --- payloads ------------------------------------------------------------------------------------------

KEYS = ["tool_call_id", "by", "input", "reason", "token", "message", "start", "max_bytes", "user_id",
        "prompt_id", "conversation_id", "model", "child_workflow_id", "pending", "from_offset", "topics",
        "items", "publisher_id", "sequence", "history", "max_rounds", "parent", "amount", "visible"]
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                         st.text(max_size=20).filter(lambda s: s != APPROVER))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def raw(data: bytes, encoding: bytes | None) -> RawValue:
    return RawValue(Payload(metadata={"encoding": encoding} if encoding is not None else {}, data=data))


def payload_strategy(call_ids: list[str]) -> st.SearchStrategy[object]:
    plausible = st.fixed_dictionaries({"tool_call_id": st.sampled_from(call_ids) | st.text(max_size=12)},
                                      optional={k: json_values for k in KEYS if k != "tool_call_id"})
    encoded = st.builds(raw, st.binary(max_size=64),
                        st.sampled_from([b"json/plain", b"binary/plain", b"binary/null", b"json/protobuf",
                                         b"binary/protobuf", b"x-unknown/encoding", b"", None]))
    huge = st.builds(lambda n, c: c * n, st.integers(100_000, 600_000), st.sampled_from(["x", "é", "\u0000"]))
    return st.one_of(json_values, plausible, encoded, huge,
                     st.builds(lambda s: {"input": s}, json_values | huge))


# --- targets -------------------------------------------------------------------------------------------


# Temporal terminates a workflow whose history passes 50 MB (dev server default): junk signals are written
# to history before the workflow sees them, so each target gets at most this much of them.
HISTORY_BUDGET_BYTES = 25_000_000
# Not sent: an update over 512 KB. Temporal echoes an update's request in the worker's accept/reject message:
# one over 2 MB makes the worker fail that workflow task on every retry whatever the workflow code does, and
# with the worker's check disabled the server terminates the workflow instead (GrpcMessageTooLarge, also
# seen for several 1-2 MB updates answered in one task). A Temporal limit, not fixed here: such a prompt is
# listed by `dagent stuck` (docs/guarantees.md, Bad input).
UPDATE_LIMIT_BYTES = 512_000


@dataclass
class Target:
    label: str
    handle: WorkflowHandle[Any, Any]
    sent_bytes: int = 0
    signals: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)


async def handler_names(raw_client: Client, target: Target) -> None:
    """Every handler the workflow itself says it has (also those registered at run time, e.g. the stream's)."""
    metadata = await raw_client.get_workflow_handle(target.handle.id).query("__temporal_workflow_metadata")
    definition = metadata.definition
    target.signals = [d.name for d in definition.signal_definitions]
    target.updates = [d.name for d in definition.update_definitions]
    target.queries = [d.name for d in definition.query_definitions] + BUILTIN_QUERIES


async def task_failures(handle: WorkflowHandle[Any, Any], *, allow: tuple[str, ...] = ("UnhandledCommand",)
                        ) -> list[str]:
    """Each WorkflowTaskFailed event, with the event before it (its trigger), but a lone one whose message
    starts with one of `allow` (UnhandledCommand: a signal came in as the workflow was ending, and the server
    asked for the task again with it). Two failed tasks in a row are a retry loop and always count."""
    events = list((await handle.fetch_history()).events)
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    found = []
    for i, e in enumerate(events):
        if e.event_type != failed:
            continue
        message = e.workflow_task_failed_event_attributes.failure.message
        again = any(later.event_type == failed for later in events[i + 1:i + 4])
        if not again and message.startswith(allow):
            continue
        found.append(f"{str(e.workflow_task_failed_event_attributes)[:1500]} "
                     f"(after {EventType.Name(events[i - 1].event_type)}: {str(events[i - 1])[:600]})")
    return found


async def send(raw_client: Client, queue: str, target: Target, kind: str, name: str,
               payloads: list[object], started: list[str]) -> str:
    """Send junk; what the SDK or the server answered (a refusal is fine, a hang or a wedge is not)."""
    handle = raw_client.get_workflow_handle(target.handle.id)
    size = sum(p.ByteSize() for p in raw_client.data_converter.payload_converter.to_payloads(payloads))
    if kind == "update" and size > UPDATE_LIMIT_BYTES:
        return "skipped: an update over 512 KB"
    if kind == "signal":
        if target.sent_bytes + size > HISTORY_BUDGET_BYTES:
            return "skipped: over the history budget"
        target.sent_bytes += size
    try:
        if kind == "signal":
            await handle.signal(name, args=payloads, rpc_timeout=timedelta(seconds=20))
        elif kind == "update":
            update = await handle.start_update(name, args=payloads, wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                                               rpc_timeout=timedelta(seconds=20))
            await asyncio.wait_for(update.result(), 1.0)  # a long poll may stay open: it must not block
        elif kind == "query":
            await handle.query(name, args=payloads, rpc_timeout=timedelta(seconds=20))
        else:
            workflow_id = f"junk-start-{uuid.uuid4().hex[:10]}"
            await raw_client.start_workflow(name, args=payloads, id=workflow_id, task_queue=queue)
            started.append(workflow_id)
        return "accepted"
    except TimeoutError:
        return "accepted, still running"
    except Exception as exc:  # refused by the workflow, the SDK or the server: any refusal is an answer
        return f"refused: {type(exc).__name__}"


def run_in(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(work, loop).result(timeout=120)


async def test_no_generated_payload_wedges_any_workflow(dev_env: WorkflowEnvironment) -> None:
    RELEASE.clear()
    target_host = dev_env.client.service_client.config.target_host
    raw_client = await Client.connect(target_host, namespace=dev_env.client.namespace)  # default converter
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        queue = client.settings.task_queue
        waiting = await client.start("pay 500")
        waiting_call = (await waiting.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        running = await client.start("hold on")
        await running.wait_until("running")
        finished = await client.start("just answer")
        assert (await finished.result()).state == "completed"
        idle = await client.start_conversation(user_id="ann")
        closed = await client.start_conversation(user_id="bob")
        await closed.close()
        targets = [Target("prompt waiting", waiting.workflow), Target("prompt running", running.workflow),
                   Target("prompt finished", finished.workflow),
                   Target("conversation idle", dev_env.client.get_workflow_handle(idle.id)),
                   Target("conversation closed", dev_env.client.get_workflow_handle(closed.id))]
        for target in targets:
            await handler_names(raw_client, target)
        # `close` takes no payload, so any payload sent to it is a valid close: only the closed one gets it.
        targets[3].signals.remove(names.CLOSE_SIGNAL)
        assert "child_approvals" in targets[0].signals and "__temporal_workflow_stream_poll" in targets[0].updates
        assert names.SEND_INPUT_UPDATE in targets[3].updates
        call_ids = [waiting_call, "call_1", ""]
        loop = asyncio.get_running_loop()
        started: list[str] = []
        answers: list[str] = []

        @st.composite
        def actions(draw: st.DrawFn) -> tuple[Target, str, str, list[object]]:
            target = draw(st.sampled_from(targets))
            kind = draw(st.sampled_from(["signal", "update", "query", "start"]))
            known = {"signal": target.signals, "update": target.updates, "query": target.queries,
                     "start": [names.PROMPT_WORKFLOW, names.CONVERSATION_WORKFLOW]}[kind]
            name = draw(st.sampled_from(known) | st.text(min_size=1, max_size=12))
            if kind == "start":
                name = draw(st.sampled_from(known))
            payloads = draw(st.lists(payload_strategy(call_ids), max_size=3))
            return target, kind, name, payloads

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=EXAMPLES <= 100,
                  suppress_health_check=list(HealthCheck))
        @given(actions())
        def junk_never_wedges(action: tuple[Target, str, str, list[object]]) -> None:
            target, kind, name, payloads = action
            answers.append(f"{target.label} {kind} {name}: "
                           f"{run_in(loop, send(raw_client, queue, target, kind, name, payloads, started))}")

        await asyncio.to_thread(junk_never_wedges)
        after_junk = {t.label: await task_failures(t.handle) for t in targets}
        assert {k: v for k, v in after_junk.items() if v} == {}, answers

        # The valid actions still work after the junk.
        resolved = await asyncio.wait_for(client.prompt(waiting.id).approve(waiting_call, by=APPROVER, wait=True), 60)
        RELEASE.set()
        waited, ran = await asyncio.wait_for(waiting.result(), 60), await asyncio.wait_for(running.result(), 60)
        answer = await idle.send("still there?")
        answered = await (await idle.prompt_started(answer.id)).result()
        final = await asyncio.wait_for(idle.close(), 60)
        statuses = [(await t.handle.describe()).status for t in targets]
        junk_started = [dev_env.client.get_workflow_handle(workflow_id) for workflow_id in started]
        for handle in junk_started:  # a valid junk conversation is still open: it closes like any other
            description = await handle.describe()
            if description.status == WorkflowExecutionStatus.RUNNING \
                    and description.workflow_type == names.CONVERSATION_WORKFLOW:
                await handle.signal(names.CLOSE_SIGNAL)
        endings = [await junk_ending(handle) for handle in junk_started]
        failures = {h.id: await task_failures(h) for h in [t.handle for t in targets] + junk_started}
        ending_failures = [await workflow_failure(t.handle) for t in targets]

    print(f"\n{len(answers)} junk actions; {sum('accepted' in a for a in answers)} accepted, "
          f"{sum('refused' in a for a in answers)} refused; {len(started)} junk starts: {sorted(set(endings))}")
    print("\n".join(f"  {n:4} {kind}" for kind, n in Counter(
        f"{a.split(' ')[2]} {a.rsplit(': ', 1)[-1]}" for a in answers).most_common()))
    assert {k: v for k, v in failures.items() if v} == {}
    assert isinstance(resolved, ToolOutput) and resolved.result == ToolSuccess(output="paid 500")
    assert waited.state == "completed" and ran.state == "completed", (waited, ran, ending_failures)
    assert isinstance(ran.output[0], ToolOutput) and ran.output[0].result == ToolSuccess(output="held 1")
    assert answered.state == "completed" and answer.id in final.prompt_ids
    assert statuses == [WorkflowExecutionStatus.COMPLETED] * len(targets)
    assert all(ending in {"completed", "failed"} for ending in endings), endings


async def workflow_failure(handle: WorkflowHandle[Any, Any]) -> str | None:
    events = list((await handle.fetch_history()).events)
    return next((str(e.workflow_execution_failed_event_attributes.failure)[:1500] for e in events
                 if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED), None)


async def junk_ending(handle: WorkflowHandle[Any, Any]) -> str:
    """How a workflow started with junk ended: it fails at once, or (valid input) runs to its end."""
    try:
        await asyncio.wait_for(handle.result(), 60)
    except TimeoutError:
        return f"still running: {handle.id}"
    except Exception:
        return "failed"
    return "completed"


def _kinds(payloads: list[object]) -> set[str]:
    seen = {f"count {min(len(payloads), 2)}"}
    for p in payloads:
        if isinstance(p, RawValue):
            seen.add(f"encoding {p.payload.metadata.get('encoding', b'<none>').decode()}")
        elif isinstance(p, str) and len(p) >= 100_000:
            seen.add("huge")
        elif isinstance(p, dict) and "tool_call_id" in p:
            seen.add("plausible")
        else:
            seen.add(type(p).__name__)
    return seen


@pytest.mark.parametrize("kind", ["count 0", "count 1", "count 2", "huge", "plausible", "dict", "list",
                                  "encoding binary/plain", "encoding json/plain", "encoding x-unknown/encoding",
                                  "encoding <none>"])
def test_the_strategy_reaches_every_kind_of_junk(kind: str) -> None:
    """The generator itself: it must be able to produce what the guard claims to send (else the guard tests
    less). Searched for each kind (`find`), not counted in a fixed sample: a fixed sample of 300 missed
    `binary/plain` in some runs of the full suite."""
    found = find(st.lists(payload_strategy(["call_1"]), max_size=3), lambda payloads: kind in _kinds(payloads),
                 settings=settings(max_examples=5000, database=None, deadline=None,
                                   suppress_health_check=list(HealthCheck)))
    assert kind in _kinds(found)





async def test_what_the_guard_found_stays_fixed(dev_env: WorkflowEnvironment) -> None:
    """Found by the guard's big runs, kept as fixed cases: `child_approvals` with no payload (a TypeError
    in a typed handler that failed the prompt), and a stream poll for an offset the prompt never reaches
    (an update that never finished, so the finished prompt's workflow never closed)."""
    raw_client = await Client.connect(dev_env.client.service_client.config.target_host,
                                      namespace=dev_env.client.namespace)
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        waiting = await client.start("pay 500")
        call_id = (await waiting.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        handle = raw_client.get_workflow_handle(waiting.id)
        await handle.signal("child_approvals")
        await handle.signal("child_approvals", args=[{"tool_call_id": call_id}, 1])
        far_poll = await handle.start_update("__temporal_workflow_stream_poll", {"from_offset": 10**9},
                                             wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        refused = await send(raw_client, client.settings.task_queue, Target("waiting", waiting.workflow),
                             "update", "__temporal_workflow_stream_poll", [{"from_offset": "soon"}], [])
        await client.prompt(waiting.id).approve(call_id, by=APPROVER, wait=True)
        prompt = await asyncio.wait_for(waiting.result(), 60)
        released = await asyncio.wait_for(far_poll.result(), 60)
        status = (await waiting.workflow.describe()).status
        failures = await task_failures(waiting.workflow)
    assert refused == "refused: WorkflowUpdateFailedError"
    assert prompt.state == "completed" and status == WorkflowExecutionStatus.COMPLETED and failures == []
    assert [a.detail for a in prompt.audit if a.kind == "ignored_child_approvals"] == [
        "expected one ChildApprovals payload, got 0", "expected one ChildApprovals payload, got 2"]
    assert released is not None  # the waiting poll was let go when the prompt ended
