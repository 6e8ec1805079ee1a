"""What the Temporal UI shows of a prompt: current details in words, handler descriptions, a readable summary.

The UI reads current details and handler descriptions through the built-in `__temporal_workflow_metadata`
query and the summary through describe; these tests read them the same way from a real dev server.
"""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.client import PromptHandle
from durable_agent.workflows.details import compact_args, cut_at_word, prompt_summary
from tests import scenarios
from tests.support.workers import agent_worker


async def _metadata(handle: PromptHandle) -> WorkflowMetadata:
    return await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)


async def test_waiting_prompt_says_what_it_waits_for_and_how_to_approve(dev_env: WorkflowEnvironment) -> None:
    long_input = "approval " + "please pay the invoice of our supplier in Lyon " * 5
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as c:
        handle = await c.start(long_input, user_id="ann")
        waiting = await handle.wait_until("waiting_for_approval")
        call = waiting.output[0]
        assert isinstance(call, ToolOutput)
        metadata = await _metadata(handle)
        details = metadata.current_details
        assert details.startswith("**Waiting for approval**: demo.pay {amount: 500}")
        assert "Paying 500 needs approval." in details
        assert f'approve_call` and payload `{{"tool_call_id": "{call.id}", "by": "YOUR-NAME"}}`' in details
        assert "reject_call" in details and f"dagent approve {handle.id} {call.id}" in details

        descriptions = {d.name: d.description for d in [*metadata.definition.signal_definitions,
                                                        *metadata.definition.query_definitions,
                                                        *metadata.definition.update_definitions]}
        for name in ("approve", "reject", "steer", "approve_call", "reject_call", "get_prompt",
                     "pending_approvals", "transcript"):
            assert descriptions.get(name), f"{name} has no description"
        assert "tool_call_id" in descriptions["approve_call"]

        description = await handle.workflow.describe()
        summary = await description.static_summary()
        assert summary == prompt_summary("ann", long_input)
        assert summary.endswith("…") and len(summary) <= 120
        assert summary.removesuffix("…").split()[-1] in long_input.split()  # cut between words
        assert long_input in (await description.static_details() or "")

        await handle.approve(call.id, by="bob")
        prompt = await handle.result()
        assert prompt.state == "completed"
        final = (await _metadata(handle)).current_details
        assert final == "Completed after 2 rounds: after decision"


async def test_failed_prompt_details_say_why(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[scenarios.plugin], model=scenarios.model) as c:
        handle = await c.start("fail")
        await handle.result()
        assert (await _metadata(handle)).current_details.startswith("Failed: scenario: model refused")


def test_summary_cut_and_argument_rendering() -> None:
    assert cut_at_word("Plan my Paris trip: check the weather", 20) == "Plan my Paris trip…"
    assert cut_at_word("short", 20) == "short"
    assert cut_at_word("a" * 50, 10) == "a" * 9 + "…"
    rendered = compact_args({"to": "ACME", "amount": 480, "note": 'say "hi"'})
    assert rendered == '{to: ACME, amount: 480, note: "say \\"hi\\""}'
    scalars = compact_args({"a": None, "b": True, "c": False, "d": 1.5, "e": "Zürich_1", "f": "a b!", "g": "",
                            "h": [7]})
    assert scalars == '{a: null, b: true, c: false, d: 1.5, e: Zürich_1, f: "a b!", g: "", h: [7]}'
