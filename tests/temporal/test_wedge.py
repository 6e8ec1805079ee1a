"""No input can wedge a prompt: every entry point takes raw payloads of any number and shape.

Before, a signal without a payload (`temporal workflow signal --name reject` with no `--input`), a start
with no or two inputs, or a bug in workflow code failed the *workflow task* on every retry: the prompt sat
in Running and nothing sent afterwards helped. Each test here sends such input through the raw SDK or the
`temporal` CLI, then checks that the history has no WorkflowTaskFailed event and what the record says.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent.agent.models import Conversation, Prompt, ToolOutput, ToolSuccess
from durable_agent.cli.devserver.binaries import temporal_cli_path
from durable_agent.client import AgentClient
from durable_agent.config.storage.converter import data_converter
from durable_agent.workflows.protocol import PromptRequest
from tests import scenarios
from tests.support.buggy_workflow import BuggyPromptWorkflow
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker

BINARY_JUNK = RawValue(Payload(metadata={"encoding": b"binary/plain"}, data=b"\x00\xff\xfe"))
UNKNOWN_ENCODING = RawValue(Payload(metadata={"encoding": b"x-no-such/encoding"}, data=b"???"))
BROKEN_JSON = RawValue(Payload(metadata={"encoding": b"json/plain"}, data=b'{"tool_call_id": '))


async def task_failures(handle: WorkflowHandle) -> list[str]:  # type: ignore[type-arg]
    """The messages of every WorkflowTaskFailed event in the workflow's history."""
    history = await handle.fetch_history()
    return [e.workflow_task_failed_event_attributes.failure.message for e in history.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]


def temporal(env: WorkflowEnvironment, *args: str) -> subprocess.CompletedProcess[str]:
    cli_env = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
    return subprocess.run([temporal_cli_path(), *args], env=cli_env, capture_output=True, text=True, timeout=60)


async def waiting_prompt(client: AgentClient) -> tuple[WorkflowHandle, str]:  # type: ignore[type-arg]
    handle = await client.start("approval pay 500")
    prompt = await handle.wait_until("waiting_for_approval")
    assert prompt.state == "waiting_for_approval"
    return handle.workflow, prompt.output[0].id  # type: ignore[union-attr]


async def test_signals_with_no_or_junk_payloads_are_audited_and_a_later_decision_works(
        dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        wf, call_id = await waiting_prompt(client)
        for name in ("reject", "approve", "steer"):  # exactly what the user typed
            done = await asyncio.to_thread(temporal, dev_env, "workflow", "signal", "-w", wf.id, "--name", name)
            assert done.returncode == 0, done.stderr
        await wf.signal("approve", args=[{"tool_call_id": call_id}, {"tool_call_id": call_id}])
        for junk in (BINARY_JUNK, UNKNOWN_ENCODING, BROKEN_JSON, 42, [1, 2], {"tool_call_id": 7}):
            await wf.signal("reject", junk)
        await wf.signal("aprove", {"tool_call_id": call_id})  # a typo in the signal name
        await wf.signal("__temporal_workflow_stream_publish", args=[])
        resolved = await client.prompt(wf.id).approve(call_id, by="alice", wait=True)
        prompt = await client.prompt(wf.id).result()
        failures = await task_failures(wf)
    assert failures == []
    assert isinstance(resolved, ToolOutput) and resolved.result == ToolSuccess(output="paid 500")
    assert prompt.state == "completed"
    kinds = [a.kind for a in prompt.audit]
    assert kinds[:3] == ["ignored_reject", "ignored_approve", "ignored_steer"]
    assert all(a.detail.startswith("expected one ") and a.detail.endswith("payload, got 0") for a in prompt.audit[:3])
    assert prompt.audit[3].detail == "expected one ApproveRequest payload, got 2"
    assert "not a valid RejectRequest" in prompt.audit[4].detail  # binary/plain bytes
    assert "not a valid RejectRequest" in prompt.audit[6].detail  # broken JSON
    assert "ignored_unknown_signal" in kinds and "ignored_stream_publish" in kinds
    assert any("no signal named 'aprove'" in a.detail for a in prompt.audit)


async def test_updates_and_queries_with_junk_are_refused_with_the_reason(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        wf, call_id = await waiting_prompt(client)
        for name, args in (("approve_call", []), ("reject_call", [BINARY_JUNK]),
                           ("approve_call", [{"tool_call_id": call_id}, {}]), ("approve_call", [{"nope": 1}])):
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await wf.execute_update(name, args=args)
            assert "payload" in str(refused.value.cause) or "not a valid" in str(refused.value.cause)
        record = await wf.query("get_prompt", args=[BINARY_JUNK, 1], result_type=Prompt)  # extra args are ignored
        assert record.state == "waiting_for_approval"
        with pytest.raises(Exception, match="not a valid TranscriptPageRequest"):
            await wf.query("transcript", {"start": -1})
        await client.prompt(wf.id).approve(call_id, wait=True)
        prompt = await client.prompt(wf.id).result()
        failures = await task_failures(wf)
    assert failures == [] and prompt.state == "completed"


@pytest.mark.parametrize("args", [[], [{"input": "approval pay 1"}, {"input": "again"}], [UNKNOWN_ENCODING]],
                         ids=["no-input", "two-inputs", "undecodable"])
async def test_a_raw_start_with_zero_two_or_undecodable_inputs_fails_at_once(
        dev_env: WorkflowEnvironment, args: list[object]) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        wf = await dev_env.client.start_workflow("PromptWorkflow", args=args, id=f"raw-start-{len(args)}-{id(args)}",
                                                 task_queue=client.settings.task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await wf.result()
        prompt = await client.prompt(wf.id).get()
        failures = await task_failures(wf)
    assert failures == []
    assert "invalid PromptRequest input" in str(failed.value.cause)
    assert prompt.state == "failed" and (prompt.error or "").startswith("invalid PromptRequest input")


async def test_the_temporal_cli_start_without_input_fails_at_once(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        started = await asyncio.to_thread(temporal, dev_env, "workflow", "start", "--type", "PromptWorkflow",
                                          "--task-queue", client.settings.task_queue, "-w", "cli-no-input")
        assert started.returncode == 0, started.stderr
        prompt = await client.prompt("cli-no-input").result()
        status = (await client.prompt("cli-no-input").workflow.describe()).status
    assert status == WorkflowExecutionStatus.FAILED
    assert prompt.error == "invalid PromptRequest input: expected one PromptRequest payload, got 0"


async def test_conversation_entry_points_take_any_payload(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        conversation = await client.start_conversation(user_id="ann")
        wf = dev_env.client.get_workflow_handle(conversation.id, result_type=Conversation)
        done = await asyncio.to_thread(temporal, dev_env, "workflow", "signal", "-w", wf.id, "--name", "send")
        assert done.returncode == 0, done.stderr
        await wf.signal("send", BINARY_JUNK)
        await wf.signal("send", args=[{"input": "a"}, {"input": "b"}])
        with pytest.raises(WorkflowUpdateFailedError, match="Workflow update failed"):
            await wf.execute_update("send_input", args=[])
        prompt = await conversation.send("completed run")
        assert (await (await conversation.prompt_started(prompt.id)).result()).state == "completed"
        await wf.signal("close", args=[{"junk": True}, 2])  # close takes no payload; extra ones are ignored
        final = await wf.result()
        failures = await task_failures(wf)
    assert failures == []
    assert [a.kind for a in final.audit] == ["ignored_send"] * 3
    assert final.audit[0].detail == "expected one SendRequest payload, got 0"
    assert final.prompt_ids == [prompt.id]


async def test_a_raw_conversation_start_with_two_inputs_fails_at_once(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        wf = await dev_env.client.start_workflow("ConversationWorkflow", args=[{}, {}], id="raw-conv-two",
                                                 task_queue=client.settings.task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await wf.result()
        failures = await task_failures(wf)
    assert failures == []
    assert "expected one ConversationRequest payload, got 2" in str(failed.value.cause)


async def test_a_bug_in_workflow_code_fails_the_prompt_visibly_instead_of_retrying_the_task(
        dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        queue = f"{client.settings.task_queue}-buggy"
        async with Worker(dev_env.client, task_queue=queue, workflows=[BuggyPromptWorkflow]):
            wf = await dev_env.client.start_workflow("BuggyPromptWorkflow", {"input": "hi"}, id="buggy-1",
                                                     task_queue=queue, result_type=Prompt)
            with pytest.raises(WorkflowFailureError):
                await wf.result()
            prompt = await wf.query("get_prompt", result_type=Prompt)
            failures = await task_failures(wf)
    assert failures == []
    assert prompt.state == "failed" and prompt.error == "internal error: KeyError: 'a bug in the workflow loop'"



async def test_a_prompt_whose_workflow_task_keeps_failing_is_listed_and_explained(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """A client that stores payloads where the worker cannot read them: the one task failure code cannot
    prevent. The prompt is found by `stuck()` and `task_problem()` says why."""
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as client:
        elsewhere = await Client.connect(dev_env.client.service_client.config.target_host,
                                         data_converter=data_converter(tmp_path, threshold=1000))
        wf = await elsewhere.start_workflow("PromptWorkflow", PromptRequest(input="x" * 5000), id="missing-blob",
                                            task_queue=client.settings.task_queue)
        try:
            for _ in range(240):  # the server flags it after two failed attempts (dev server config)
                if [p for p in await client.stuck() if p.workflow_id == wf.id]:
                    break
                await asyncio.sleep(0.5)
            problem = await client.prompt(wf.id).task_problem()
            cli_env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                       "DAGENT_LOG_LEVEL": "WARNING"}
            listed, shown = [await asyncio.to_thread(
                subprocess.run, [*DAGENT_CMD, *args], env=cli_env, capture_output=True, text=True,
                timeout=60) for args in (["stuck"], ["show", wf.id])]
        finally:
            await wf.terminate("test cleanup")
    assert problem is not None and problem.attempt >= 2 and problem.workflow_type == "PromptWorkflow"
    assert "payload store" in problem.reason and "cannot read key" in problem.reason  # the store's own message
    assert listed.returncode == 1 and f"{wf.id}  PromptWorkflow  attempt" in listed.stdout
    assert shown.returncode == 1 and shown.stderr.startswith(f"prompt {wf.id} is stuck: its workflow task failed")
