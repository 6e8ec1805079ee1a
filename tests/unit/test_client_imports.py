"""A client loads no workflow code: `durable_agent.client` (and the modules behind `dagent pending` and `dagent
ls`) needs the workflows' names and wire models, never the workflow classes and their rooms, which only a worker
registers (`workers/plugin.py` asks `durable_agent.workflows` for `WORKFLOWS` when it configures a worker)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

WORKFLOW_CODE = {"prompt", "workflow", "conversation", "ledger", "deployment", "approvals", "tool_runner", "record",
                 "sub_agents", "decision_checks", "round_input", "gate", "steering", "legacy"}


def _workflow_modules_loaded_by(*modules: str) -> set[str]:
    script = (f"import importlib, json, sys\nfor m in {list(modules)!r}: importlib.import_module(m)\n"
              "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules "
              "if m.startswith('durable_agent.workflows.'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("modules", [
    ("durable_agent.client",),
    # what `dagent pending` and `dagent ls` import when they run (their command modules import the rest lazily)
    ("durable_agent.cli.app", "durable_agent.cli.commands.decide", "durable_agent.cli.commands.inspect",
     "durable_agent.agent.identity", "durable_agent.client", "durable_agent.client.pending", "durable_agent.cli.ls",
     "durable_agent.cli.follow", "durable_agent.cli.render"),
], ids=["client", "dagent pending and ls"])
def test_a_client_loads_no_workflow_code(modules: tuple[str, ...]) -> None:
    loaded = _workflow_modules_loaded_by(*modules)
    assert "names" in loaded  # the check sees the package's modules at all
    assert loaded & WORKFLOW_CODE == set()


def test_a_worker_still_gets_every_workflow() -> None:
    from durable_agent.workers.plugin import DurableAgentPlugin
    from durable_agent.workers.settings import Settings
    from durable_agent.workflows import WORKFLOWS

    registered = DurableAgentPlugin(Settings()).workflows(None)  # type: ignore[operator,misc]
    assert [w.__name__ for w in registered] == ["PromptWorkflow", "ConversationWorkflow", "BudgetLedgerWorkflow"]
    assert list(registered) == WORKFLOWS


def test_a_client_loads_no_worker_module() -> None:
    """What a client needs is `ClientSettings` and the `config` layer (connection, converter, payload store); the
    worker's settings, routing, plugin and activities are a worker's (test_layers forbids the import itself)."""
    script = ("import importlib, json, sys\nimportlib.import_module('durable_agent.client')\n"
              "from durable_agent.client import AgentClient\nAgentClient.connect\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('durable_agent.workers', "
              "'durable_agent.activities', 'durable_agent.config')))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    loaded = json.loads(done.stdout)
    assert "durable_agent.config.settings" in loaded  # the check sees our modules at all
    assert [m for m in loaded if not m.startswith("durable_agent.config")] == []
