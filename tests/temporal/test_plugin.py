"""`DurableAgentPlugin` alone configures a client, a worker and a replayer; `Settings` is read in one place."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from durable_agent.agent.errors import DurableAgentError, PluginPrepareError, PromptFailedError
from durable_agent.agent.models import Prompt
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import FatalModelError, RetryableModelError
from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime
from durable_agent.workflows import names


async def test_a_plain_worker_and_client_configured_only_by_the_plugin(dev_env: WorkflowEnvironment,
                                                                        tmp_path: Path) -> None:
    settings = Settings(task_queue="plugin-only", payload_dir=str(tmp_path / "payloads"), payload_threshold=2048,
                        file_dir=str(tmp_path / "files"), workflow_sandbox="strict")
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": ScriptedModel([text("hi")])})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings, runtime=runtime)])
    long_input = "x" * 5000  # above the threshold: the plugin's converter keeps it out of history
    async with Worker(client, task_queue=settings.task_queue):  # everything else comes from the client's plugin
        handle = await client.start_workflow(names.PROMPT_WORKFLOW, {"input": long_input}, id="plugin-only-1",
                                             task_queue=settings.task_queue, result_type=Prompt)
        prompt = await handle.result()
    assert (prompt.state, prompt.input, prompt.output[0].model_dump()["text"]) == ("completed", long_input, "hi")
    assert any((tmp_path / "payloads").iterdir()), "the external payload store was not used"

    history = await handle.fetch_history()
    result = await Replayer(workflows=[], plugins=[DurableAgentPlugin(settings)]).replay_workflow(history)
    assert result.replay_failure is None


def test_settings_read_every_documented_variable() -> None:
    env = {"TEMPORAL_ADDRESS": "h:1", "TEMPORAL_NAMESPACE": "ns", "DAGENT_TASK_QUEUE": "q",
           "DAGENT_PAYLOAD_DIR": "/p", "DAGENT_PAYLOAD_THRESHOLD": "99", "DAGENT_LOG_LEVEL": "DEBUG",
           "DAGENT_UI_URL": "http://ui", "DAGENT_MODEL_NORMAL": "openai:a", "DAGENT_MODEL_HIGH": "openai:b",
           "DAGENT_PLUGINS": "a:b, c:d", "DAGENT_FILE_DIR": "/f", "DAGENT_STREAM_TEXT": "0",
           "DAGENT_PRICES": "{}", "DAGENT_WORKFLOW_SANDBOX": "off", "DAGENT_MAX_CACHED_WORKFLOWS": "7",
           "DAGENT_MAX_WORKFLOW_TASKS": "9",
           "OPENAI_API_KEY": "sk-secret"}
    settings = Settings.from_env(env)
    defaults = Settings()
    for name, field in Settings.model_fields.items():
        assert field.description, f"Settings.{name} is not documented"
        variable = field.description.split(":")[0]
        if variable in env:
            assert getattr(settings, name) != getattr(defaults, name), f"{variable} was not read into {name}"
    assert settings.plugins == ("a:b", "c:d")
    assert settings.provider_env["OPENAI_API_KEY"] == "sk-secret"
    assert "sk-secret" not in repr(settings) and "sk-secret" not in settings.model_dump_json()
    with pytest.raises(ValueError, match="DAGENT_WORKFLOW_SANDBOX"):
        Settings.from_env({"DAGENT_WORKFLOW_SANDBOX": "maybe"})


def test_a_worker_on_a_client_without_the_plugin_is_refused(dev_env: WorkflowEnvironment) -> None:
    plain = Client(dev_env.client.service_client, namespace=dev_env.client.namespace)
    with pytest.raises(ValueError, match="client connected with plugins=\\[DurableAgentPlugin"):
        Worker(plain, task_queue="never-polled", plugins=[DurableAgentPlugin(Settings())])


def test_error_type_names_on_the_wire_are_the_error_classes_names() -> None:
    """Retry lists and failure handling match ApplicationError types by these names: they must not drift."""
    assert names.FATAL_MODEL_ERROR == FatalModelError.__name__
    assert names.RETRYABLE_MODEL_ERROR == RetryableModelError.__name__
    assert names.PLUGIN_PREPARE_ERROR == PluginPrepareError.__name__
    assert issubclass(FatalModelError, DurableAgentError) and issubclass(PromptFailedError, DurableAgentError)


async def test_the_plugin_with_a_runtime_and_create_worker_register_each_activity_once(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """docs/configuration.md's two ways together (they failed with `More than one activity named
    dagent.model_round`): create_worker is `Worker(client, activities=...)` on the plugin's client."""
    from durable_agent.workers.worker import create_worker
    from durable_agent.workflows.sdk_private import activity_name

    settings = Settings(task_queue="plugin-and-create-worker", payload_dir=str(tmp_path / "payloads"),
                        file_dir=str(tmp_path / "files"), workflow_sandbox="strict")
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": ScriptedModel([text("hi")])})
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings, runtime=runtime)])
    async with create_worker(client, runtime, task_queue=settings.task_queue) as worker:
        names_registered = [activity_name(f) for f in worker.config(active_config=True)["activities"]]
        prompt = await client.execute_workflow(names.PROMPT_WORKFLOW, {"input": "hello"}, id="plugin-and-create-1",
                                               task_queue=settings.task_queue, result_type=Prompt)
    assert len(names_registered) == len(set(names_registered)) and "dagent.model_round" in names_registered
    assert prompt.state == "completed"
