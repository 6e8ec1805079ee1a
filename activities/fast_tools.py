"""Which calls of a tool that leaves `local` unset run as Temporal local activities.

A local activity runs in the worker that runs the prompt, inside its workflow task: one server round trip
and one workflow task fewer per call than a regular activity, with the same at-least-once retries. It
cannot heartbeat and holds the workflow task while it runs, so it suits only calls that are short and
report nothing while running. A worker learns that from the calls it runs: a tool whose last
`RUNS_BEFORE_LOCAL` calls here each finished within `FAST_SECONDS` without reporting progress has its next
calls planned local; one slow or reporting call (local or not) sends it back to regular activities for
good. A call that needs approval is planned the same way: approved, a fast tool's call runs inside the workflow
task that takes the decision. MCP tools and sub-agents always stay regular; `local=True`/`False` on a tool
overrides all this. The plan is part of the model round's result, so replays take the recorded choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable_agent.agent.tools import Tool

FAST_SECONDS = 0.5
RUNS_BEFORE_LOCAL = 3


@dataclass
class FastTools:
    """What this worker process has seen of each tool's calls (`AgentRuntime.fast_tools`)."""

    enabled: bool = True
    fast_runs: dict[str, int] = field(default_factory=dict)
    slow: set[str] = field(default_factory=set)

    def runs_local(self, tool: Tool[Any]) -> bool:
        if tool.options.local is not None:
            return tool.options.local
        if not self.enabled or tool.input_schema is not None or tool.id in self.slow:
            return False
        return self.fast_runs.get(tool.id, 0) >= RUNS_BEFORE_LOCAL

    def observe(self, tool: Tool[Any], seconds: float, reported_progress: bool) -> None:
        if tool.options.local is not None:
            return
        if seconds > FAST_SECONDS or reported_progress:
            self.slow.add(tool.id)
        else:
            self.fast_runs[tool.id] = self.fast_runs.get(tool.id, 0) + 1
