"""Temporal's workflow sandbox is on by default (DAGENT_WORKFLOW_SANDBOX unset = `on`, our package passed
through): a worker built from default settings stops non-deterministic workflow code and runs prompts through
an approval; `off` stays available as an opt-in. Real dev server, in-process workers."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
import warnings

import pytest
from pydantic import JsonValue
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agent.client import AgentClient, DecisionRefused
from durable_agent.workers.plugin import DurableAgentPlugin, workflow_runner
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.corrections import merge_patch
from durable_agent.workflows.decision_tokens import DecisionClaims, input_digest, sign_decision
from durable_agent.workflows.protocol import PendingApproval
from durable_agent.workflows.transcript import json_digest
from tests.support.api import PLUGIN, key_pair, web_model
from tests.support.clock_workflow import ClockWorkflow


def _default_settings(**update: object) -> Settings:
    """Settings as a deployment gets them (no DAGENT_WORKFLOW_SANDBOX), on a fresh queue."""
    settings = Settings.from_env({"DAGENT_PAYLOAD_DIR": ".dagent/test-payloads",
                                  "DAGENT_FILE_DIR": ".dagent/test-files"})
    return settings.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", **update})


def test_the_default_is_the_sandbox_with_our_package_passed_through() -> None:
    assert Settings().workflow_sandbox == "on" and _default_settings().workflow_sandbox == "on"
    runner = workflow_runner(Settings().workflow_sandbox)
    assert type(runner) is SandboxedWorkflowRunner
    assert "durable_agent" in runner.restrictions.passthrough_modules
    assert isinstance(workflow_runner(Settings.from_env({"DAGENT_WORKFLOW_SANDBOX": "off"}).workflow_sandbox),
                      UnsandboxedWorkflowRunner)


async def _first_task_failure(handle: WorkflowHandle[ClockWorkflow, str], seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for event in (await handle.fetch_history()).events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event.workflow_task_failed_event_attributes.failure.message
        await asyncio.sleep(0.1)
    raise AssertionError("the workflow task did not fail")


async def test_a_default_worker_stops_workflow_code_that_reads_the_clock(dev_env: WorkflowEnvironment) -> None:
    settings = _default_settings()
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])
    async with Worker(client, task_queue=settings.task_queue, workflows=[ClockWorkflow]):
        handle = await client.start_workflow(ClockWorkflow.run, id=f"clock-{uuid.uuid4().hex[:8]}",
                                             task_queue=settings.task_queue)
        message = await _first_task_failure(handle)
        await handle.terminate(reason="test over")
    assert "datetime.datetime.now" in message
    # The opt-in: without the sandbox the same code runs (and would silently break replay).
    off = _default_settings(workflow_sandbox="off")
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(off)])
    async with Worker(client, task_queue=off.task_queue, workflows=[ClockWorkflow]):
        assert await client.execute_workflow(ClockWorkflow.run, id=f"clock-{uuid.uuid4().hex[:8]}",
                                             task_queue=off.task_queue)


async def test_a_default_worker_runs_a_prompt_through_an_approval(dev_env: WorkflowEnvironment) -> None:
    settings = _default_settings()
    model = web_model()
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": model, "high": model})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])
    async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings):
        agent = AgentClient(client, settings)
        prompt = await agent.start("pay bob 250", user_id="sandboxed")
        await prompt.wait_until("waiting_for_approval")
        [call] = await prompt.pending_approvals()
        await prompt.approve(call.tool_call_id, by="sandboxed", input={"amount": 120})
        done = await prompt.result()
    assert done.state == "completed"
    assert done.tool_call(call.tool_call_id).result.output == {"sent": 120.0, "to": "bob"}  # type: ignore[union-attr]



async def test_a_default_worker_checks_a_signed_corrected_approval(dev_env: WorkflowEnvironment) -> None:
    """Workflow code imports jwt (a decision token) and jsonschema (a correction) on first use, passed through
    the sandbox: a default worker with a decision key refuses a correction that breaks the tool's schema and
    takes a signed, corrected approval, and the sandbox warns of no import made during a workflow run."""
    private_pem, public_pem = key_pair()
    settings = _default_settings(decision_public_key=public_pem)
    model = web_model()
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": model, "high": model})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])

    def token(prompt_id: str, call: PendingApproval, corrected: dict[str, JsonValue]) -> str:
        claims = DecisionClaims(sub="signer", prompt=prompt_id, call=call.tool_call_id, decision="approve",
                                input_sha256=input_digest(corrected), exp=int(time.time()) + 120, run=call.run_id,
                                args_sha256=json_digest(merge_patch(call.input, corrected)),
                                nonce=secrets.token_urlsafe(12), tool=call.tool)
        return sign_decision(claims, private_pem)

    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings):
            agent = AgentClient(client, settings)
            prompt = await agent.start("pay bob 250", user_id="signed")
            await prompt.wait_until("waiting_for_approval")
            [call] = await prompt.pending_approvals()
            wrong: dict[str, JsonValue] = {"amount": "lots"}
            with pytest.raises(DecisionRefused, match="invalid correction"):
                await prompt.approve(call.tool_call_id, by="signer", input=wrong,
                                     token=token(prompt.id, call, wrong), wait=True)
            corrected: dict[str, JsonValue] = {"amount": 120}
            await prompt.approve(call.tool_call_id, by="signer", input=corrected,
                                 token=token(prompt.id, call, corrected), wait=True)
            done = await prompt.result()
    assert done.state == "completed"
    assert done.tool_call(call.tool_call_id).result.output == {"sent": 120.0, "to": "bob"}  # type: ignore[union-attr]
    assert [str(w.message) for w in warned if "after initial workflow load" in str(w.message)] == []
