"""The conversation section of the bench, run short on the dev server, on both sides: this project's
conversation and the hand-rolled one (a new workflow per turn, the whole transcript in its input). The late
turns alternate with the early turns of a fresh conversation, and the flat-latency target is judged on that
pair."""

from __future__ import annotations

import statistics
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.baseline import BaselineWorkflow, model_activity, tool_activity
from bench.config import BASELINE, PRODUCT
from bench.conversation import WINDOW, measure_baseline_conversation, measure_conversation
from bench.plugin import model, plugin
from bench.report import build_rows, fx, mb, render
from bench.scenario import current_turn
from bench.sides import BaselineSide
from tests.support.workers import agent_worker


async def test_both_conversations_late_turns_measured_beside_early_turns_of_a_fresh_one(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=model, file_dir=str(tmp_path / "files")) as agent:
        ours = await measure_conversation(agent, dev_env.client, turns=25, marks=(10, 25),
                                          payload_dir=tmp_path / "payloads", file_dir=tmp_path / "files")
    client = Client(**{**dev_env.client.config(), "data_converter": pydantic_data_converter})
    side = BaselineSide(client, "", tmp_path, {})
    side.task_queue = f"baseline-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=side.task_queue, workflows=[BaselineWorkflow],
                      activities=[model_activity, tool_activity]):
        theirs = await measure_baseline_conversation(side, turns=25, marks=(10, 25))

    for side in (ours, theirs):
        assert side["turns_done"] == 25 and side["stalled_at"] is None
        reference = side["reference_latencies_ms"]
        assert len(reference) == WINDOW and all(value > 0 for value in reference)
        assert side["interleaved_ms"] == {10: statistics.median(reference),
                                          25: statistics.median(side["latencies_ms"][-WINDOW:])}
    # The hand-rolled turn carries every earlier turn: its 25th turn's history is several times its 10th's.
    assert theirs["child_history_bytes"][25] > 2 * theirs["child_history_bytes"][10]
    assert ours["child_history_bytes"][25] < 1.2 * ours["child_history_bytes"][10]
    rows, targets = build_rows({"conversation": {PRODUCT: ours, BASELINE: theirs}})
    flat = targets["conversation_flat"]
    assert flat["value"] == ours["interleaved_ms"][25] / ours["interleaved_ms"][10]
    assert flat["pass"] == (flat["value"] <= 1.2)
    by_metric = {row.metric.strip(): row for row in rows}
    total = next(row for row in rows if row.metric.startswith("conversation of 25 turns"))
    assert (total.product, total.baseline) == (mb(ours["total_bytes"]), mb(theirs["total_bytes"]))
    late = by_metric["turn latency at turn 25 (interleaved)"]
    assert late.ratio == fx(ours["interleaved_ms"][25] / theirs["interleaved_ms"][25])
    assert by_metric["growth, late / early (interleaved)"].verdict in ("PASS", "FAIL")
    assert "growth, late / early (interleaved)" in render(rows)


def test_the_current_turn_is_the_last_user_message_and_the_tool_results_after_it() -> None:
    messages = ["user:a", "result", "result", "user:b", "call", "result"]
    assert current_turn(messages, lambda m: m.startswith("user"), lambda m: m == "result") == ("user:b", 1)
    assert current_turn(["result"], lambda m: m.startswith("user"), lambda m: m == "result") == (None, 1)
