"""Rate limits per provider: each provider's model calls on a task queue of their own, limited by that
provider's rate; a prompt starts on its tier's first provider's queue and a fallback round moves to the
queue of the model it falls back to. The providers are the real anthropic and openai SDKs against the
local fake server."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import pytest
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.plugins import Plugin
from durable_agent.client import AgentClient
from durable_agent.workers.rate_limits import queue_rate
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_workers
from durable_agent.workflows.protocol import ModelRouting, PromptRequest
from tests.fakes import FakeLLMServer
from tests.fakes.providers import make_provider
from tests.support.workers import TEST_SETTINGS

CHAIN = "anthropic:test-model,openai-chat:test-model"  # what make_provider builds for "anthropic" and "chat"


async def _queue_rate(client: Client, queue: str) -> float:
    """The rate the server enforces on a model queue (from its workers' polls)."""
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, report_config=True), retry=True)
    return described.effective_rate_limit.requests_per_second


def _model_queues(history: object) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events  # type: ignore[attr-defined]
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "dagent.model_round"]


@pytest.mark.parametrize("tier_queue", [False, True], ids=["both-providers-routed", "first-provider-on-tier-queue"])
async def test_a_fallback_round_runs_on_its_providers_queue(dev_env: WorkflowEnvironment, llm: FakeLLMServer,
                                                            tier_queue: bool) -> None:
    tag = uuid.uuid4().hex[:8]
    queues = {"anthropic": f"anthropic-{tag}", "openai-chat": f"openai-{tag}"}
    if tier_queue:  # anthropic has no queue of its own: its calls stay on the tier's model queue
        queues.pop("anthropic")
    settings = TEST_SETTINGS.model_copy(update={
        "task_queue": f"wf-{tag}", "model_normal": CHAIN, "model_fallback_attempts": 1,
        "model_task_queue": f"models-{tag}" if tier_queue else "",
        "provider_queues": queues, "provider_rates": {"openai-chat": 8.0}, "model_rate": 3.0}).check_provider_queues()
    anthropic_queue = queues.get("anthropic", f"models-{tag}")
    runtime = build_runtime(settings, plugins=[Plugin("none")],
                            providers={"normal": [make_provider(llm, "anthropic"), make_provider(llm, "chat")]})
    llm.reply_error("anthropic", 400, message="fake: this model refuses")  # prompt 1 falls back to openai-chat
    llm.reply_text("chat", "answer from openai")
    llm.reply_text("anthropic", "answer from anthropic")  # prompt 2: the first model answers
    async with AsyncExitStack() as stack:
        workers = create_workers(dev_env.client, runtime, settings)
        assert sorted(w.task_queue for w in workers) == sorted([f"wf-{tag}", anthropic_queue, f"openai-{tag}"])
        for worker in workers:
            await stack.enter_async_context(worker)
        client = AgentClient(dev_env.client, settings)
        fell_back = await client.start("question 1")
        first = await fell_back.result()
        answered = await client.start("question 2")
        second = await answered.result()
        # each provider's queue is limited by the server at the rate derived from that provider's limit
        assert await _queue_rate(dev_env.client, f"openai-{tag}") == pytest.approx(queue_rate(8.0))
        assert await _queue_rate(dev_env.client, anthropic_queue) == pytest.approx(queue_rate(3.0))
        fell_back_history = await fell_back.workflow.fetch_history()
        answered_history = await answered.workflow.fetch_history()
    assert first.state == "completed" and first.output[-1].text == "answer from openai"  # type: ignore[union-attr]
    assert [(r.model, r.fallback) for r in first.model_rounds] == [("openai-chat:test-model", 1)]
    assert _model_queues(fell_back_history) == [anthropic_queue, f"openai-{tag}"]
    assert second.output[-1].text == "answer from anthropic"  # type: ignore[union-attr]
    assert _model_queues(answered_history) == [anthropic_queue]
    assert len(llm.requests("anthropic")) == 2 and len(llm.requests("chat")) == 1


def test_the_client_records_where_each_provider_runs() -> None:
    settings = Settings.from_env({
        "DAGENT_MODEL_NORMAL": "anthropic:claude-sonnet-4-5,openai:gpt-4.1", "DAGENT_MODEL_HIGH": "openai:gpt-5",
        "DAGENT_MODEL_TASK_QUEUE": "models", "DAGENT_PROVIDER_QUEUES": "anthropic=models-anthropic",
        "DAGENT_PROVIDER_RATES": "anthropic=5", "DAGENT_MODEL_RATE": "20"})
    assert settings.model_queue_for("normal") == "models-anthropic"  # the tier's first provider
    assert settings.model_queue_for("high") == "models"  # openai has no queue of its own
    routing = settings.model_routing("normal")
    assert routing == ModelRouting(tier_queue="models", providers={"anthropic": "models-anthropic"})
    assert routing.queue_for("openai:gpt-4.1") == "models" and routing.queue_for("anthropic:x") == "models-anthropic"
    assert settings.model_queue_limits == {"models": 20.0, "models-anthropic": 5.0}
    assert Settings().model_routing("normal") is None


def test_a_request_without_routing_is_the_request_it_always_was() -> None:
    """Old histories carry no `model_routing`; a new request without it serialises exactly as before."""
    assert "model_routing" not in PromptRequest(input="hi").model_dump()
    assert PromptRequest.model_validate({"input": "hi"}).model_routing is None
    routed = PromptRequest(input="hi", model_routing=ModelRouting(providers={"openai": "q"}))
    assert PromptRequest.model_validate_json(routed.model_dump_json()) == routed


def test_provider_settings_are_parsed() -> None:
    settings = Settings.from_env({"DAGENT_PROVIDER_QUEUES": " anthropic = models-anthropic , openai=models-openai,",
                                  "DAGENT_PROVIDER_RATES": "anthropic=5,openai=20.5"})
    assert settings.provider_queues == {"anthropic": "models-anthropic", "openai": "models-openai"}
    assert settings.provider_rates == {"anthropic": 5.0, "openai": 20.5}
    assert settings.model_queue_limits == {"models-anthropic": 5.0, "models-openai": 20.5}
    assert Settings.from_env({}).provider_queues == {} and Settings.from_env({}).model_queue_limits == {}


@pytest.mark.parametrize(("env", "message"), [
    ({"DAGENT_PROVIDER_QUEUES": "anthropic"}, "DAGENT_PROVIDER_QUEUES must be provider=value pairs"),
    ({"DAGENT_PROVIDER_QUEUES": "anthropic="}, "DAGENT_PROVIDER_QUEUES must be provider=value pairs"),
    ({"DAGENT_PROVIDER_QUEUES": "Anthropic:x=q"}, "DAGENT_PROVIDER_QUEUES must be provider=value pairs"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=a,openai=b"}, "DAGENT_PROVIDER_QUEUES names openai twice"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=q,anthropic=q"}, "queue q is given to more than one provider"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=durable-agent"}, "openai's queue durable-agent is also DAGENT_TASK_QUEUE"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=models", "DAGENT_MODEL_TASK_QUEUE": "models"},
     "is also DAGENT_MODEL_TASK_QUEUE"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=q", "DAGENT_PROVIDER_RATES": "openai=fast"},
     "DAGENT_PROVIDER_RATES must be a number, not 'fast'"),
    ({"DAGENT_PROVIDER_QUEUES": "openai=q", "DAGENT_PROVIDER_RATES": "openai=0"},
     "DAGENT_PROVIDER_RATES must be greater than 0"),
    ({"DAGENT_PROVIDER_RATES": "anthropic=5"}, "DAGENT_PROVIDER_RATES: anthropic has no queue"),
])
def test_bad_provider_settings_get_one_line_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Settings.from_env(env)
    assert message in str(caught.value) and "\n" not in str(caught.value)
