"""A worker on a namespace without our search attributes refuses at start, in one line naming each missing one
(a sub-agent's prompt once waited on `ParentPromptId` until someone added it: ecosystem-turn4.md §3)."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent import DurableAgentPlugin, Settings, check_search_attributes
from durable_agent.cli.devserver import SEARCH_ATTRIBUTES
from durable_agent.workers.search_attributes import MissingSearchAttributes, required_search_attributes
from tests.support.processes import REPO_ROOT as ROOT


async def test_a_namespace_without_our_search_attributes_is_refused_naming_them(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:8]}"
    await dev_env.client.workflow_service.register_namespace(RegisterNamespaceRequest(
        namespace=namespace, workflow_execution_retention_period=Duration(seconds=int(timedelta(days=1)
                                                                                      .total_seconds()))))
    settings = Settings(namespace=namespace, task_queue="bare", payload_dir=str(tmp_path / "payloads"),
                        file_dir=str(tmp_path / "files"))
    client = Client(dev_env.client.service_client, namespace=namespace, plugins=[DurableAgentPlugin(settings)])
    refusal: MissingSearchAttributes | None = None
    for _ in range(50):  # a new namespace takes a moment to reach every service
        try:
            await check_search_attributes(client)
        except MissingSearchAttributes as exc:
            refusal = exc
            break
        await asyncio.sleep(0.2)
    assert refusal is not None
    message = str(refusal)
    assert "\n" not in message
    for name in ("PromptState", "UserId", "ConversationId", "ParentPromptId"):
        assert f"--name {name} --type Keyword" in message
    with pytest.raises(MissingSearchAttributes):  # the worker's own start runs the same check
        async with Worker(client, task_queue="bare"):
            await asyncio.sleep(1)
    await check_search_attributes(dev_env.client)  # the dev server's namespace has them all: no refusal


def test_every_place_lists_the_same_search_attributes() -> None:
    required = required_search_attributes()
    assert set(required) == {"PromptState", "UserId", "ConversationId", "ParentPromptId"}
    assert SEARCH_ATTRIBUTES == required  # `dagent server`, the tests' servers
    setup = (ROOT / "deploy" / "temporal-setup.sh").read_text()
    default = re.search(r'SEARCH_ATTRIBUTES="\$\{SEARCH_ATTRIBUTES:-([^}]*)\}"', setup)
    assert default is not None
    assert dict(pair.split("=") for pair in default.group(1).split()) == required
    deploying = (ROOT / "docs" / "deploying.md").read_text()
    cloud = deploying.split("- **Temporal Cloud with an API key**")[1].split("\n- ")[0]
    assert [name for name in required if not re.search(rf"\b{name}\b", cloud)] == [], "the Cloud setup misses one"
