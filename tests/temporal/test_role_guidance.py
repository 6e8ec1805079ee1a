"""A call only a role may decide (`vault.open`, approvers `role:finance`): every place that explains the
decision says how to say the role, and a refusal is its reason alone.

- The Temporal UI's Current Details gives payloads with `"roles": ["finance"]` and `--role finance`, and the
  `approve_call`/`reject_call` descriptions name `roles`; following the page works.
- The update's refusal (raw SDK): an application error with the message, no Python frames, no cause chain.
- `dagent approve` without the role: one `refused:` line saying it once, naming `--role finance`.
- `dagent approve` on a finished prompt says who decided the call, not the server's "already completed".
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from durable_agent.workflows import names
from durable_agent.workflows.protocol import ApproveRequest
from tests.support.api import PLUGIN, web_model
from tests.support.processes import REPO_ROOT
from tests.support.workers import agent_worker


async def test_a_role_call_is_explained_with_its_role_everywhere(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[PLUGIN], model=web_model()) as agent:
        handle = await agent.start("open vault b1", user_id="ann")
        await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 60)
        metadata = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        details = metadata.current_details
        assert '`{"tool_call_id": "call_r1_0", "by": "YOUR-NAME", "roles": ["finance"]}`' in details, details
        assert '"roles": ["finance"], "reason": "WHY"}`' in details
        assert "is decided by anyone with the finance role" in details
        assert f"`dagent approve {handle.id} call_r1_0 --by YOUR-NAME --role finance`" in details
        updates = {u.name: u.description for u in metadata.definition.update_definitions}
        assert '"roles": ["finance"]' in updates[names.APPROVE_CALL_UPDATE]
        assert "needed when the call's approvers name a role" in updates[names.APPROVE_CALL_UPDATE]
        assert '"roles"' in updates[names.REJECT_CALL_UPDATE]

        # The page's first payload, with the name alone: refused with the reason, no frames, no cause.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.workflow.execute_update(names.APPROVE_CALL_UPDATE,
                                                 ApproveRequest(tool_call_id="call_r1_0", by="fiona"))
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == names.DECISION_REFUSED_ERROR
        assert cause.message == ("decision on 'call_r1_0' refused: fiona may not decide this call; approvers: "
                                 "role:finance"), cause.message
        assert cause.details == ("not-allowed",)
        assert cause.failure is not None and cause.failure.stack_trace == "" and not cause.failure.HasField("cause")

        # The CLI: one line, the reason once, and how to say the role.
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": agent.settings.task_queue}
        env.pop("DAGENT_API_URL", None)

        def dagent(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "durable_agent.cli", *args], env=env, cwd=REPO_ROOT,
                                  capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

        no_role = await asyncio.to_thread(dagent, "approve", handle.id, "call_r1_0", "--by", "fiona")
        assert no_role.returncode == 1
        assert no_role.stderr == ("refused: decision on 'call_r1_0' refused: fiona may not decide this call; "
                                  "approvers: role:finance — if you hold that role, add --role finance\n")

        # Following the page's guidance works.
        approved = await handle.workflow.execute_update(
            names.APPROVE_CALL_UPDATE, ApproveRequest(tool_call_id="call_r1_0", by="fiona", roles=["finance"]))
        assert approved is not None
        done = await asyncio.wait_for(handle.result(), 60)
        assert done.state == "completed"

        late = await asyncio.to_thread(dagent, "approve", handle.id, "call_r1_0", "--by", "fiona", "--role",
                                       "finance")
        assert late.returncode == 1
        assert late.stderr.startswith(f"refused: prompt {handle.id} is completed: vault.open [call_r1_0] was "
                                      "already approved by fiona at "), late.stderr
        assert late.stderr.count("\n") == 1 and "workflow execution already completed" not in late.stderr
