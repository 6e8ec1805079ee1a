"""Worker versioning (issue 27): a waiting prompt finishes on the build it started on; new prompts run on the next.

Real dev server (the session `dev_env`). Build v1 and build v2 join one Worker Deployment on a fresh task
queue; v2's prompt workflow has an incompatible change (tests/support/versioned.py: a timer v1 histories
do not have). A prompt started on v1 waits for approval; v2 becomes the current version; a new prompt runs
on v2 (its history has the v2 timer); the waiting prompt, approved afterwards, finishes on v1 (pinned),
which replaying it on v2 could not have done.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import Settings
from durable_agent.workers.versioning import (
    DeploymentError,
    deployment_config,
    describe_deployment,
    set_current_version,
    set_ramping_version,
)
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows import ConversationWorkflow, PromptWorkflow
from durable_agent.workflows.versioning.deployment import (
    AutoUpgradeConversationWorkflow,
    PinnedPromptWorkflow,
    versioned_workflows,
)
from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.support.versioned import V2Plugin, model, plugin
from tests.support.workers import TEST_SETTINGS


async def _eventually(step: Callable[[], Awaitable[None]], wait_s: float = 30) -> None:
    """Retry a rollout step until the server accepts it (a version exists once its worker has polled)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            await step()
            return
        except DeploymentError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _task_workers(handle: PromptHandle) -> tuple[set[str], int]:
    """Identities of the workers that completed the prompt's workflow tasks, and how many timers it started."""
    history = await handle.workflow.fetch_history()
    identities = {e.workflow_task_completed_event_attributes.identity for e in history.events
                  if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}
    timers = sum(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in history.events)
    return identities, timers


async def _build_of(handle: PromptHandle) -> tuple[str, int]:
    info = (await handle.workflow.describe()).raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id, info.behavior


def test_each_workflow_type_declares_its_behavior_for_versioned_workers_only() -> None:
    from temporalio.workflow import _Definition

    def behavior(cls: type) -> VersioningBehavior | None:
        return _Definition.must_from_class(cls).versioning_behavior

    assert behavior(PinnedPromptWorkflow) == VersioningBehavior.PINNED
    assert behavior(AutoUpgradeConversationWorkflow) == VersioningBehavior.AUTO_UPGRADE
    # Unversioned workers register the plain classes: the server refuses a behavior from them.
    assert behavior(PromptWorkflow) in (None, VersioningBehavior.UNSPECIFIED)
    assert behavior(ConversationWorkflow) in (None, VersioningBehavior.UNSPECIFIED)
    assert versioned_workflows([PromptWorkflow, ConversationWorkflow, PromptWorkflow]) == [
        PinnedPromptWorkflow, AutoUpgradeConversationWorkflow]


def test_versioning_is_off_unless_both_name_and_build_id_are_set() -> None:
    assert deployment_config(Settings.from_env({})) is None
    config = deployment_config(Settings.from_env({"DAGENT_DEPLOYMENT_NAME": "agents", "DAGENT_BUILD_ID": "abc1"}))
    assert config is not None and config.use_worker_versioning
    assert config.version.to_canonical_string() == "agents.abc1"
    with pytest.raises(ValueError, match="DAGENT_BUILD_ID is not set") as info:
        Settings.from_env({"DAGENT_DEPLOYMENT_NAME": "agents"})
    assert "\n" not in str(info.value)


async def test_waiting_prompt_finishes_on_v1_while_new_prompts_run_on_v2(dev_env: WorkflowEnvironment) -> None:
    name = f"dagent-test-{uuid.uuid4().hex[:8]}"
    v1 = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "deployment_name": name,
                                          "build_id": "v1"})
    v2 = v1.model_copy(update={"build_id": "v2", "workflow_sandbox": "off"})
    runtime = build_runtime(v1, plugins=[plugin], providers={"normal": model, "high": model})
    client = AgentClient(dev_env.client, v1)
    v2_client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace, plugins=[V2Plugin(v2)])

    async with create_worker(dev_env.client, runtime, task_queue=v1.task_queue, settings=v1, identity="build-v1"):
        await _eventually(lambda: set_current_version(dev_env.client, name, "v1"))
        waiting = await client.start("pay 250", user_id="versioning")
        prompt = await asyncio.wait_for(waiting.wait_until("waiting_for_approval"), 30)
        call = next(e for e in prompt.output if isinstance(e, ToolOutput))

        async with create_worker(v2_client, runtime, task_queue=v2.task_queue, settings=v2, identity="build-v2"):
            await _eventually(lambda: set_ramping_version(dev_env.client, name, "v2", 0))
            await _eventually(lambda: set_current_version(dev_env.client, name, "v2"))
            fresh = await client.start("pay 5", user_id="versioning")
            done_fresh = await asyncio.wait_for(fresh.result(), 30)
            await waiting.approve(call.id, by="alice")
            done_waiting = await asyncio.wait_for(waiting.result(), 30)
            deployment = await describe_deployment(dev_env.client, name)

    assert done_fresh.state == "completed" and done_fresh.output[-1].text == "done: sent 5"  # type: ignore[union-attr]
    assert done_waiting.state == "completed", done_waiting.error
    assert done_waiting.output[-1].text == "done: sent 250"  # type: ignore[union-attr]
    assert await _task_workers(fresh) == ({"build-v2"}, 1)  # the v2 code path, on v2
    assert await _task_workers(waiting) == ({"build-v1"}, 0)  # every task, after the approval too, on v1
    assert await _build_of(waiting) == ("v1", VersioningBehavior.PINNED)
    assert await _build_of(fresh) == ("v2", VersioningBehavior.PINNED)
    assert deployment.current == "v2" and deployment.ramping is None
    assert {v.build_id for v in deployment.versions} == {"v1", "v2"}

    # The same rollout state through the CLI, and a refused step as one line.
    address = dev_env.client.service_client.config.target_host
    code, out, err = await _dagent("deploy", "describe", "--deployment", name, "--address", address)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"deployment {name}: current v2")
    assert {line.split()[0] for line in out.splitlines()[1:]} == {"v1", "v2"}
    code, out, err = await _dagent("deploy", "set-current", "v9", "--deployment", name, "--address", address)
    assert code == 1 and err.startswith(f"error: set {name}.v9 current:") and err.count("\n") == 1, err


async def _dagent(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*DAGENT_CMD, *args, cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_rollout_errors_are_one_line(dev_env: WorkflowEnvironment) -> None:
    with pytest.raises(DeploymentError) as info:
        await describe_deployment(dev_env.client, f"no-such-{uuid.uuid4().hex[:6]}")
    assert "not found" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DeploymentError, match="between 0 and 100"):
        await set_ramping_version(dev_env.client, "x", "v9", 150)
