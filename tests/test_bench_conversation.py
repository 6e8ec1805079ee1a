"""The conversation section of the bench, run short on the dev server: the late turns alternate with the
early turns of a fresh conversation, and the flat-latency target is judged on that pair."""

from __future__ import annotations

import statistics
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from bench.conversation import WINDOW, measure_conversation
from bench.plugin import model, plugin
from bench.report import build_rows
from tests.support.workers import agent_worker


async def test_late_turns_are_measured_beside_early_turns_of_a_fresh_conversation(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=model, file_dir=str(tmp_path / "files")) as agent:
        result = await measure_conversation(agent, dev_env.client, turns=25, marks=(10, 25),
                                            payload_dir=tmp_path / "payloads", file_dir=tmp_path / "files")
    assert result["turns_done"] == 25 and result["stalled_at"] is None
    reference = result["reference_latencies_ms"]
    assert len(reference) == WINDOW and all(value > 0 for value in reference)
    assert result["interleaved_ms"] == {10: statistics.median(reference),
                                        25: statistics.median(result["latencies_ms"][-WINDOW:])}
    _, targets = build_rows({"conversation": result})
    flat = targets["conversation_flat"]
    assert flat["value"] == result["interleaved_ms"][25] / result["interleaved_ms"][10]
    assert flat["pass"] == (flat["value"] <= 1.2)
