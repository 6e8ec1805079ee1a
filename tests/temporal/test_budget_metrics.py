"""Spend against budget in metrics and in the record (issue 27): `dagent worker --metrics-port` as a subprocess
on the real dev server exports each ledger's spend and limit per principal; `dagent show` prints them from the
prompt's record."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.period_budgets import BudgetLimit
from durable_agent.cli.devserver import free_port
from durable_agent.client import AgentClient
from tests.support.processes import DAGENT_CMD, REPO_ROOT, WorkerProcess
from tests.support.workers import TEST_SETTINGS
from tests.temporal.test_metrics import scrape, total, wait_for


async def test_budget_spend_and_limit_are_metrics_and_in_the_record(dev_env: WorkflowEnvironment,
                                                                    tmp_path: Path) -> None:
    port = free_port()
    queue = f"budget-metrics-{uuid.uuid4().hex[:8]}"
    user = f"m-{uuid.uuid4().hex[:8]}"
    address = dev_env.client.service_client.config.target_host
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update({"TEMPORAL_ADDRESS": address, "DAGENT_TASK_QUEUE": queue, "DAGENT_PLUGINS": "tests.scenarios:plugin",
                "DAGENT_MODEL_NORMAL": "scripted:tests.scenarios:model", "DAGENT_FILE_DIR": str(tmp_path / "files"),
                "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"), "DAGENT_METRICS_HOST": "127.0.0.1"})
    worker = WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port))
    try:
        await wait_for(worker.ready, "worker ready", 60, worker.log)
        settings = TEST_SETTINGS.model_copy(update={"task_queue": queue, "temporal_address": address,
                                                    "payload_dir": str(tmp_path / "payloads")})
        client = await AgentClient.connect(settings)
        await client.set_budget(f"user:{user}", BudgetLimit(period="month", max_tokens=100_000, max_cost=50,
                                                            metrics=True))
        await client.set_budget(f"user:{user}-quiet", BudgetLimit(max_tokens=5))  # not asked: no series
        prompt = await asyncio.wait_for(client.run("parallel", user_id=user), 60)
        tokens = prompt.usage.input_tokens + prompt.usage.output_tokens
        assert prompt.state == "completed" and tokens > 0
        [standing] = prompt.budgets
        assert (standing.principal, standing.spent_tokens, standing.reservations) == (f"user:{user}", tokens, 0)

        principal = {"dagent_budget_principal": f"user:{user}"}  # dagent.budget.principal on OTLP

        def exported() -> bool:
            samples = scrape(port)
            return total(samples, "dagent_budget_spent_tokens", **principal) == tokens

        await wait_for(exported, "budget spend exported", 30, worker.log)
        samples = scrape(port)
        assert not any(value == f"user:{user}-quiet" for _, series in samples for _, value in series), \
            "a principal exported unasked"
        assert total(samples, "dagent_budget_limit_tokens", **principal) == 100_000
        assert total(samples, "dagent_budget_limit_cost", **principal) == 50
        assert total(samples, "dagent_budget_spent_cost", **principal) == 0  # the scenarios' model has no price

        shown = await asyncio.to_thread(
            subprocess.run, [*DAGENT_CMD, "show", prompt.id, "--address", address], cwd=REPO_ROOT,
            capture_output=True, text=True, timeout=60, check=False, env={**env})
        assert shown.returncode == 0, shown.stderr
        assert (f"budget  user:{user}: {tokens} of 100000 tokens, 0.0000 of 50 cost this month"
                in shown.stdout.splitlines())
    finally:
        worker.kill()
