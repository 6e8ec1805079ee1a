"""The version guard around the one private SDK class the project subclasses (workers/plugin.py `_ContextsByCall`,
over the sandbox runner's `_Instance`): it accepts the installed temporalio, refuses a changed shape, and with
the guard off the runner falls back to Temporal's own sandboxed instances. (tests/temporal/test_sandbox_runner.py checks
that, with the guard on, every answer equals the SDK's own.) Runs in the fast set of scripts/test-matrix, so the
lowest and the newest temporalio both go through it."""

from __future__ import annotations

from typing import Any

import pytest
import temporalio.workflow
from temporalio.worker import WorkflowInstance

from durable_agent.workers import plugin
from durable_agent.workers.plugin import AgentSandboxedRunner, SandboxedInstance, _ContextsByCall, sandbox_instance_fits
from durable_agent.workflows import PromptWorkflow


def test_the_installed_sdk_fits_the_guard() -> None:
    assert sandbox_instance_fits() and plugin.SANDBOX_INSTANCE_FITS
    assert SandboxedInstance is not WorkflowInstance


class _AnswersItself(SandboxedInstance):  # type: ignore[misc,valid-type]
    def get_serialization_context(self, command_info: Any) -> Any:
        return None


class _OtherConstructor(SandboxedInstance):  # type: ignore[misc,valid-type]
    def __init__(self, details: Any, restrictions: Any) -> None:
        pass


def test_a_changed_private_class_is_refused() -> None:
    assert not sandbox_instance_fits(_AnswersItself)  # no longer a call on __temporal_in_sandbox
    assert not sandbox_instance_fits(_OtherConstructor)
    assert not sandbox_instance_fits(WorkflowInstance)
    assert not sandbox_instance_fits(object)


@pytest.mark.parametrize("fits", [True, False])
async def test_the_runner_uses_its_instances_only_while_the_guard_holds(monkeypatch: pytest.MonkeyPatch,
                                                                      fits: bool) -> None:
    created: list[type] = []
    original = AgentSandboxedRunner.create_instance

    def recording(self: AgentSandboxedRunner, det: Any) -> WorkflowInstance:
        instance = original(self, det)
        created.append(type(instance))
        return instance

    monkeypatch.setattr(plugin, "SANDBOX_INSTANCE_FITS", fits)
    monkeypatch.setattr(AgentSandboxedRunner, "create_instance", recording)
    # the SDK validates a workflow by creating an instance (on a running loop, as in a worker)
    AgentSandboxedRunner().prepare_workflow(temporalio.workflow._Definition.must_from_class(PromptWorkflow))
    assert created == ([_ContextsByCall] if fits else [SandboxedInstance])
