"""Sub-agents: an agent offered to another agent as a tool. Calling it runs a child prompt (its own
instructions, model tier, plugins, max rounds and output schema); its final answer is the call's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, JsonValue

from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ModelTier
from durable_agent.agent.tools import ApprovalPolicy, Tool

SUB_AGENT_METADATA = "sub_agent"


class SubAgentTask(BaseModel):
    task: str = Field(min_length=1, description="What the sub-agent should do, with everything it needs to know.")


@dataclass(frozen=True)
class SubAgent:
    """`plugins` names the worker's plugins the sub-agent may use (None: all of them)."""

    id: str
    description: str
    instructions: str
    model: ModelTier = "normal"
    plugins: tuple[str, ...] | None = None
    max_rounds: int = 10
    output_schema: dict[str, JsonValue] | str | None = None
    approval: ApprovalPolicy | None = None

    def tool(self) -> Tool[SubAgentTask]:
        async def never_called(args: SubAgentTask, ctx: ToolContext) -> Any:
            raise RuntimeError(f"sub-agent {self.id!r} runs as a child prompt, not as a tool function")

        return Tool(id=self.id, description=self.description, input_model=SubAgentTask, fn=never_called,
                    approval=self.approval, metadata={SUB_AGENT_METADATA: self})


def sub_agent_of(tool: Tool[Any]) -> SubAgent | None:
    found = tool.metadata.get(SUB_AGENT_METADATA)
    return found if isinstance(found, SubAgent) else None
