"""A frontend closing connections under calls (HTTP/2 GOAWAY at its maximum connection age, 5 minutes by
default) costs the approvals list nothing. A raw service call made without `retry=True` (the SDK's default
for raw calls) fails now and then with CANCELLED "operation was canceled" when its connection closes under
it — the failure CI saw in `AgentClient.pending` — while the SDK's retrying transport absorbs it. Here, on a
real dev server whose connections live one second, `list_page` (behind `dagent pending` and `GET
/approvals`) runs beside the same call made without retries until that one has been cut off, and never fails."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest_asyncio
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from durable_agent.client.pending import list_page
from durable_agent.workers.plugin import DurableAgentPlugin
from tests.support.workers import TEST_SETTINGS

LOOPS = 8
CUT_OFFS = 5  # the bare call cut off this often: ours has run through as many closing connections
SECONDS_AT_MOST = 60.0
_UNLIMITED = ("frontend.namespaceRPS", "frontend.rps", "frontend.namespaceRPS.visibility")


@pytest_asyncio.fixture(scope="module")
async def short_lived_connections() -> AsyncIterator[WorkflowEnvironment]:
    from durable_agent.cli.devserver import extra_args_for_start_local
    from durable_agent.cli.devserver.binaries import temporal_cli_path

    limits = [arg for key in _UNLIMITED for arg in ("--dynamic-config-value", f"{key}=100000")]
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        dev_server_extra_args=[*extra_args_for_start_local(), "--log-level", "error", *limits,
                               "--dynamic-config-value", 'frontend.keepAliveMaxConnectionAge="1s"',
                               "--dynamic-config-value", 'frontend.keepAliveMaxConnectionAgeGrace="1s"'])
    async with env:
        yield env


def _cut_off(exc: RPCError) -> bool:
    return exc.status == RPCStatusCode.CANCELLED and exc.message == "operation was canceled"


async def _loop(call: Callable[[], Awaitable[object]], until: Callable[[], bool], failures: list[RPCError]) -> int:
    """Make `call` until `until()` (or time is up); its failures go to `failures` as they happen."""
    answered = 0
    deadline = time.monotonic() + SECONDS_AT_MOST
    while not until() and time.monotonic() < deadline:
        try:
            await call()
            answered += 1
        except RPCError as exc:
            failures.append(exc)
    return answered


async def test_the_approvals_list_is_not_failed_by_a_closing_connection(
        short_lived_connections: WorkflowEnvironment) -> None:
    address = short_lived_connections.client.service_client.config.target_host
    bare = await Client.connect(address)
    ours = await Client.connect(address, plugins=[DurableAgentPlugin(TEST_SETTINGS)])
    workflow_id = f"cut-off-{uuid.uuid4().hex[:8]}"
    await bare.start_workflow("NoWorkerRunsThis", id=workflow_id, task_queue=f"nowhere-{workflow_id}")
    query = f"WorkflowId = '{workflow_id}'"
    request = ListWorkflowExecutionsRequest(namespace=bare.namespace, query=query, page_size=10)
    bare_failures: list[RPCError] = []
    ours_failures: list[RPCError] = []

    def bare_was_cut_off() -> bool:
        return sum(map(_cut_off, bare_failures)) >= CUT_OFFS

    def bare_call() -> Awaitable[object]:
        return bare.workflow_service.list_workflow_executions(request)

    answered = await asyncio.gather(*[_loop(bare_call, bare_was_cut_off, bare_failures) for _ in range(LOOPS)],
                                    *[_loop(lambda: list_page(ours, query), bare_was_cut_off, ours_failures)
                                      for _ in range(LOOPS)])
    ours_answered = sum(answered[LOOPS:])

    assert bare_was_cut_off(), f"fewer than {CUT_OFFS} cut-offs in {SECONDS_AT_MOST:g} s: {bare_failures}"
    assert ours_failures == [] and ours_answered > 0
    await bare.get_workflow_handle(workflow_id).terminate(reason="test over")
