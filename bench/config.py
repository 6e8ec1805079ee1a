"""Benchmark settings: what each section measures and how often, and the names of the two sides."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = ("footprint", "latency", "history", "approval", "throughput", "waiting", "long", "conversation")
PRODUCT, BASELINE = "durable-agent", "baseline"
# the project's worker with Temporal's sandbox off (DAGENT_WORKFLOW_SANDBOX=off, the opt-in); the project's
# default side has it on. Results of runs before the default changed name the sandboxed side PRODUCT_SANDBOXED.
PRODUCT_UNSANDBOXED = "durable-agent-sandbox-off"
PRODUCT_SANDBOXED = "durable-agent+sandbox"
SMALL = 16  # bytes of tool output in the "small" scenarios


@dataclass
class Config:
    latency_rounds: tuple[int, ...] = (1, 5, 20, 100)
    latency_repeats: int = 5
    throughput_prompts: int = 100
    throughput_rounds: int = 3
    throughput_repeats: int = 5  # bursts per side, interleaved; the median is reported
    history_rounds: tuple[int, ...] = (5, 20, 100)
    big_rounds: tuple[int, ...] = (20, 50)  # prompts with `big_size` outputs
    big_size: int = 10_240
    approval_repeats: int = 20
    waiting_prompts: int = 1_000
    resume_samples: int = 40  # waiting prompts approved one by one (approve -> result), spread over the lot
    list_repeats: int = 3  # approvals-list timings (client, CLI, API) with the prompts waiting: median of
    query_list_max: int = 2_000  # the per-prompt-query list (the old path, and the baseline's) only up to this N
    cold_repeats: int = 10  # cold starts (`dagent --help`, `dagent ls`, worker to first poll): median of
    long_rounds: int = 1_000
    long_size: int = 10_240
    long_cap_s: float = 200.0
    start_concurrency: int = 50
    waiting_batch: int = 50  # arrivals in the waiting test: bursts of this many prompts
    # sections that start fresh worker processes; the others carry on with the previous section's workers
    fresh_for: tuple[str, ...] = ("footprint", "latency", "throughput", "waiting", "long")
    settle_s: float = 2.0  # pause before reading a worker's RSS
    conversation_turns: int = 500

    @classmethod
    def quick(cls) -> Config:
        return cls(latency_rounds=(1, 5, 20), latency_repeats=2, throughput_prompts=20, throughput_repeats=1,
                   history_rounds=(5, 20, 100), big_rounds=(10,), approval_repeats=3, waiting_prompts=50,
                   resume_samples=5, list_repeats=1, cold_repeats=3,
                   long_cap_s=3.0, fresh_for=("footprint", "latency", "waiting", "long"), settle_s=0.5,
                   conversation_turns=30)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
