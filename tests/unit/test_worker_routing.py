"""A worker's routing (workers/routing.py) fills a prompt's request only where its caller chose nothing."""

from __future__ import annotations

import pytest

from durable_agent.config.settings import ClientSettings
from durable_agent.workers.settings import Settings
from durable_agent.workflows.protocol import ModelRouting, PromptRequest

WORKER = Settings(model_normal="anthropic:claude,openai:gpt", model_high="openai:gpt-5", model_task_queue="models",
                  model_task_queue_high="models-high", provider_queues={"anthropic": "models-anthropic"})


def _received(data: dict[str, object]) -> PromptRequest:
    """A request as a workflow decodes it: only the fields its starter sent are set."""
    return PromptRequest.model_validate_json(PromptRequest.model_validate(data).model_dump_json())


def test_a_request_without_routing_gets_the_workers_for_its_tier() -> None:
    normal, high = _received({"input": "hi"}), _received({"input": "hi", "model": "high"})
    for request in (normal, high):
        WORKER.routing().fill(request)
    assert normal.model_task_queue == "models-anthropic"  # the tier's first provider has a queue of its own
    assert normal.model_routing == ModelRouting(tier_queue="models", providers={"anthropic": "models-anthropic"})
    assert high.model_task_queue == "models-high" and high.model_routing is not None
    assert not normal.model_local and not high.model_local


def test_a_callers_own_routing_is_kept() -> None:
    request = _received({"input": "hi", "model_task_queue": "mine"})
    WORKER.routing().fill(request)
    assert request.model_task_queue == "mine" and request.model_routing is None


def test_local_model_calls_come_from_the_worker() -> None:
    request = _received({"input": "hi"})
    Settings(model_calls="local").routing().fill(request)
    assert request.model_local and request.model_task_queue is None


def test_a_worker_without_routing_leaves_the_request_as_it_came() -> None:
    request = _received({"input": "hi"})
    Settings().routing().fill(request)
    assert request == _received({"input": "hi"}) and request.model_fields_set == {"input"}


def test_a_client_reads_no_worker_variable() -> None:
    """Where model calls run is not a client's setting: a client starts even with a worker variable it could not
    parse, which a worker refuses with one line naming it."""
    env = {"DAGENT_MODEL_CALLS": "sometimes", "DAGENT_TASK_QUEUE": "q"}
    client = ClientSettings.from_env(env)
    assert client.task_queue == "q" and not hasattr(client, "model_calls")
    with pytest.raises(ValueError, match="DAGENT_MODEL_CALLS"):
        Settings.from_env(env)
