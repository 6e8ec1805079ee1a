"""What tools receive: identity, plugin state, services and side-channel outputs (plugins: agent/plugins.py)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import JsonValue

from durable_agent.agent.models import FileOutput, HoldsPromptRef, PromptRef, ScheduledPrompt, WidgetOutput


class Services(Mapping[str, Any]):
    """The worker's dependency container: named objects (DB pools, HTTP clients) tools may use."""

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(items or {})

    def __getitem__(self, name: str) -> Any:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"no service {name!r} registered on this worker") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class FileStore(Protocol):
    """Where file contents live: outside the prompt record, referenced by `content_ref`."""

    def put(self, name: str, content: bytes, media_type: str) -> str: ...

    def get(self, content_ref: str) -> bytes: ...

    def scoped(self, namespace: str, workflow_id: str) -> FileStore:
        """The store for one workflow's files (stores that keep files per workflow, for retention)."""
        ...


class DirectoryFileStore:
    """Content-addressed files in a directory (`sha256:<hex>` refs), safe to write twice on retries."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, name: str, content: bytes, media_type: str) -> str:
        digest = hashlib.sha256(content).hexdigest()
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / digest
        if not path.exists():
            path.write_bytes(content)
        return f"sha256:{digest}"

    def get(self, content_ref: str) -> bytes:
        scheme, _, digest = content_ref.partition(":")
        if scheme != "sha256" or not digest.isalnum():
            raise ValueError(f"not a file reference of this store: {content_ref!r}")
        return (self.root / digest).read_bytes()

    def scoped(self, namespace: str, workflow_id: str) -> DirectoryFileStore:
        return self


@dataclass
class ToolContext(HoldsPromptRef):
    """Passed to every tool call. `idempotency_key` is the same across retries and worker crashes."""

    prompt: PromptRef  # which prompt the call belongs to; its ids are readable as `user_id`, `prompt_id`, ...
    tool_call_id: str
    idempotency_key: str
    state: dict[str, JsonValue]
    services: Services
    file_store: FileStore
    attempt: int = 1
    progress: Callable[[str, float | None], None] = lambda message, fraction: None
    side_outputs: list[FileOutput | WidgetOutput | ScheduledPrompt] = field(default_factory=list)
    is_cancelled: Callable[[], bool] = lambda: False
    conversation_schedule: list[ScheduledPrompt] = field(default_factory=list)
    """The conversation's scheduled prompts that had not fired when this prompt started (with `fire_at`); what
    this prompt's own calls schedule or cancel is taken when it ends. Empty outside a conversation."""

    @property
    def cancelled(self) -> bool:
        """True once the prompt was cancelled. An async tool is also interrupted at its next `await` (with
        `asyncio.CancelledError`, which it may catch to clean up, then re-raise); a tool doing blocking work
        in a thread (`asyncio.to_thread`) should check this between steps and stop."""
        return self.is_cancelled()

    def add_file(self, name: str, content: bytes | str, *, media_type: str = "text/plain",
                 summary: str | None = None) -> FileOutput:
        """Attach a file for the user. The model sees only `summary`, never the content."""
        data = content.encode() if isinstance(content, str) else content
        ref = self.file_store.put(name, data, media_type)
        entry = FileOutput(tool_call_id=self.tool_call_id, name=name, media_type=media_type, size=len(data),
                           content_ref=ref, summary=summary or f"File {name} was attached for the user.")
        self.side_outputs.append(entry)
        return entry

    def display_widget(self, widget: str, data: JsonValue, *, fallback_text: str = "") -> WidgetOutput:
        """Show rich data in a UI. Display only: the model never sees widgets."""
        entry = WidgetOutput(tool_call_id=self.tool_call_id, widget=widget, data=data,
                             fallback_text=fallback_text)
        self.side_outputs.append(entry)
        return entry

    def schedule_prompt(self, message: str, *, delay_seconds: float | None = None, at: datetime | None = None,
                        id: str | None = None) -> ScheduledPrompt:
        """Ask this prompt's conversation to run a system-initiated prompt later, with `message` as its context:
        `delay_seconds` after this prompt ends, or `at`. Needs a conversation; the id defaults to one derived from
        the idempotency key (the same on every retry of this call)."""
        if self.conversation_id is None:
            raise ValueError("scheduling a prompt needs a conversation: start this prompt through a conversation")
        if (delay_seconds is None) == (at is None):
            raise ValueError("give exactly one of delay_seconds or at")
        entry = ScheduledPrompt(tool_call_id=self.tool_call_id, message=message, delay_seconds=delay_seconds, at=at,
                                id=id or "sch-" + hashlib.sha256(self.idempotency_key.encode()).hexdigest()[:10])
        self.side_outputs.append(entry)
        return entry

    def cancel_scheduled_prompt(self, id: str) -> ScheduledPrompt:
        """Ask this prompt's conversation to drop the scheduled prompt `id` if it has not fired."""
        entry = ScheduledPrompt(tool_call_id=self.tool_call_id, id=id, cancel=True)
        self.side_outputs.append(entry)
        return entry

    def report_progress(self, message: str, fraction: float | None = None) -> None:
        """Report progress of a long call; it also heartbeats the activity."""
        self.progress(message, fraction)


def copy_state(state: JsonValue) -> dict[str, JsonValue]:
    return copy.deepcopy(state) if isinstance(state, dict) else {}
