"""Where a prompt's model calls run is the worker's to say (workers/routing.py): a worker whose environment names a
model queue sends the model calls of every prompt it runs there, whatever the environment of the client that
started the prompt; a caller that names a queue in its request (a raw SDK start) keeps it; and a prompt's history
replays on a worker whose model queue was renamed since (Temporal's replay check compares an activity's type, not
its task queue)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_model_worker
from durable_agent.workflows.names import MODEL_ROUND_ACTIVITY, PROMPT_WORKFLOW
from durable_agent.workflows.protocol import PromptRequest

TEST_ENV = {"DAGENT_PAYLOAD_DIR": ".dagent/test-payloads", "DAGENT_FILE_DIR": ".dagent/test-files",
            "DAGENT_WORKFLOW_SANDBOX": "strict", "DAGENT_PLUGINS": ""}


def _model_queues(history: WorkflowHistory) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == MODEL_ROUND_ACTIVITY]


def _client(env: WorkflowEnvironment, settings: Settings) -> Client:
    """A client of its own process, as `dagent` or an API would connect: the plugin built from its environment."""
    return Client(env.client.service_client, namespace=env.client.namespace, plugins=[DurableAgentPlugin(settings)])


def _settings(env: Mapping[str, str]) -> Settings:
    return Settings.from_env({**TEST_ENV, **env})


async def test_the_worker_not_the_client_says_where_model_calls_run(dev_env: WorkflowEnvironment) -> None:
    tag = uuid.uuid4().hex[:8]
    workflows, models, elsewhere = f"wf-{tag}", f"models-{tag}", f"override-{tag}"
    worker_settings = _settings({"DAGENT_TASK_QUEUE": workflows, "DAGENT_MODEL_TASK_QUEUE": models})
    # the client's environment names a model queue no worker polls: were it the client's to say, no prompt would end
    client_settings = _settings({"DAGENT_TASK_QUEUE": workflows, "DAGENT_MODEL_TASK_QUEUE": f"client-{tag}"})
    model = ScriptedModel(lambda request: text("routed by the worker"))
    runtime = build_runtime(worker_settings, plugins=[Plugin("none")], providers={"normal": model, "high": model})
    # a team's own worker: `Worker` on a client carrying the plugin built from the worker's environment
    worker_client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                           plugins=[DurableAgentPlugin(worker_settings, runtime=runtime)])
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(Worker(worker_client, task_queue=workflows))
        for queue in (models, elsewhere):
            await stack.enter_async_context(create_model_worker(worker_client, runtime, task_queue=queue))
        agent = AgentClient(_client(dev_env, client_settings), client_settings)
        handle = await agent.start("where do you run?", user_id="ann")
        prompt = await handle.result()
        routed = await handle.workflow.fetch_history()
        # a raw SDK start that names its own model queue keeps it
        raw = await agent.client.start_workflow(
            PROMPT_WORKFLOW, PromptRequest(input="and you?", model_task_queue=elsewhere), id=f"raw-{tag}",
            task_queue=workflows)
        await raw.result()
        overridden = await raw.fetch_history()
    assert prompt.state == "completed" and prompt.output[-1].text == "routed by the worker"  # type: ignore[union-attr]
    assert _model_queues(routed) == [models]
    assert _model_queues(overridden) == [elsewhere]
    # the same history replays on a worker whose model queue was renamed since, and on one without any
    for renamed in ({"DAGENT_MODEL_TASK_QUEUE": f"renamed-{tag}"}, {"DAGENT_PROVIDER_QUEUES": f"scripted=p-{tag}"}):
        replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(_settings(renamed))])
        result = await replayer.replay_workflow(routed, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
