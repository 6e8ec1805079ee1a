"""Settings of the crash harness: targets, pacing, timeouts and the paths it works with."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from google.protobuf.duration_pb2 import Duration

Target = Literal["worker", "server"]
Spawn = Literal["fork", "exec"]

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_MARKER = "worker on "
TARGETS = ("any", "model", "tool", "approval", "between", "decision")
PHASE_ORDER = ("model", "tool", "between", "approval", "decision", "other")
# Share of kills that first wait until at most one worker is still starting; the others may follow each other
# faster than workers restart (down to a full outage). Without this pacing, in a 100-kill run on a loaded
# box workers spent more time starting than working, and calls ran out of retry attempts.
REFILL_SHARE = 0.3
DEFAULT_PACE = 0.4  # the longest delay before a kill starts looking for its target (CI: a dense burst)
SOAK_PACE = 2.0  # --long: kills spread out, so the run measures durability rather than retry budgets
TARGET_WAIT_S = 1.0  # how long a kill aimed "between" calls waits for that moment before it strikes anyway
# Kills aimed at a model call, a tool call, an approval wait or a decision wait for it as long as a crash
# prompt is still running (for approvals the approver holds its decisions meanwhile, so prompts pile up
# waiting): driven by what is observed, not by time. This cap only ends a wait that could never end.
STATE_TARGET_CAP_S = 60.0
# Kills aim only at a call's first run, and spare (when there is a choice) workers running a retried call:
# every kill of a call uses up one of its attempts (model: 8; tools: max_attempts + 2), and hitting the same
# retried call again and again tests the retry budget, not durability. Unseen attempts (handed to a worker
# that dies before it runs them) still count; the report lists the highest attempt reached.
MAX_TARGETED_RUNS = 1
BETWEEN_WINDOW_S = 0.15  # a kill this soon after a call ended lands while its result is being recorded
APPROVER = "crash-harness"
REJECT_REASON = "declined by the crash harness"
STEER_MESSAGE = "Please also note the order number."
RESCUE_TIMEOUT = Duration(seconds=3)
ZYGOTE_PRELOAD = ["durable_agent.cli.worker_process", "durable_agent.workers.run", "durable_agent.workers.worker",
                  "durable_agent.workflows.prompt.workflow", "durable_agent.workflows.conversation",
                  "durable_agent.workflows.budget.ledger", "durable_agent.activities.agent_activities",
                  "tests.crash.scenario"]
SOURCE_DIRS = ("agent", "activities", "workflows", "workers", "plugins", "cli", "tests/crash")
