"""The private SDK names this project relies on live in one module (workflows/sdk_private.py): nothing else
reaches into `temporalio` internals, and each fenced name still does what it did (the stream's handler names:
tests/temporal/test_junk_payloads.py; the eviction call: tests/temporal/test_resting_eviction.py). Runs in the
fast set of scripts/test-matrix, so the lowest and the newest temporalio both go through it."""

from __future__ import annotations

import re
from pathlib import Path

from temporalio import activity

from durable_agent.workflows import PromptWorkflow, names, sdk_private

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "workflows", "activities", "workers", "client", "cli", "api", "plugins", "durable_agent")
PRIVATE = re.compile(r"temporalio\.[\w.]*\._|from temporalio[\w.]* import _"
                     r"|\._bridge_worker\b|\b_Definition\b|\._failure\b")


def test_no_product_module_but_the_fence_names_a_private_sdk_name() -> None:
    paths = [path for folder in PRODUCT for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(paths) > 100, "the scan found the product"
    found = [f"{path.relative_to(ROOT)}:{number}" for path in paths if path != ROOT / "workflows" / "sdk_private.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if PRIVATE.search(line)]
    assert found == []
    assert PRIVATE.search("from temporalio.worker._workflow_instance import X") and PRIVATE.search("w._bridge_worker")


def test_a_registered_activity_and_a_workflow_definition_are_read() -> None:
    @activity.defn(name="team.thing")
    async def thing() -> None: ...

    async def plain() -> None: ...

    assert (sdk_private.activity_name(thing), sdk_private.activity_name(plain)) == ("team.thing", "plain")
    definition = sdk_private.workflow_definition(PromptWorkflow)
    assert definition is not None and definition.name == names.PROMPT_WORKFLOW
    assert sdk_private.workflow_definition(int) is None
