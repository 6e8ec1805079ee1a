"""Messages the user sends a running prompt (the steer signal): refused once the prompt has ended, held until
the next model round, and, once one arrived, the calls the model still planned are skipped (never run).

No Temporal decorators: PromptWorkflow's steer signal and its round loop delegate here.
"""

from __future__ import annotations

from durable_agent.agent.models import TERMINAL_STATES, MessageOutput
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.tool_runner import SKIPPED_BY_STEER
from durable_agent.workflows.protocol import PlannedCall, SteerRequest


class Steering(Room):
    def __init__(self, context: PromptContext) -> None:
        super().__init__(context)
        self._messages: list[str] = []  # arrived, not yet delivered to the model

    def arrived(self) -> bool:
        """Whether a message waits for the next round (it outdates this round's calls and answer)."""
        return bool(self._messages)

    def accept(self, request: SteerRequest) -> str | None:
        """Take a message, or say why not."""
        prompt = self._record.prompt
        if prompt.state in TERMINAL_STATES:
            return f"prompt {prompt.id} is already {prompt.state}"
        self._messages.append(request.message)
        return None

    def deliver(self) -> None:
        """The messages enter the record (the next model round reads them there)."""
        for message in self._messages:
            self._record.append(MessageOutput(role="user", source="steer", text=message))
        self._messages.clear()

    def skip(self, calls: list[PlannedCall]) -> None:
        """The planned calls a message outdated: recorded, never run."""
        for call in calls:
            self._record.end_call(self._record.open_call(call), SKIPPED_BY_STEER, "skipped")
