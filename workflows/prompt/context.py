"""What every room of PromptWorkflow shares: the request the prompt runs, its record (record.py) and the host
that stands for the running workflow (host.py). The conductor (workflow.py) builds one and hands it to each room
with the rooms that room works with, no more."""

from __future__ import annotations

from dataclasses import dataclass

from durable_agent.agent.models import Prompt
from durable_agent.workflows.prompt.host import Host
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.protocol import PromptRequest


@dataclass(frozen=True)
class PromptContext:
    request: PromptRequest
    record: Recorder

    @property
    def host(self) -> Host:
        return self.record.host

    @property
    def prompt(self) -> Prompt:
        return self.record.prompt


class Room:
    """A room of the prompt: reads the request, writes the record, acts on Temporal through the host."""

    def __init__(self, context: PromptContext) -> None:
        self._request = context.request
        self._record = context.record
        self._host = context.host
