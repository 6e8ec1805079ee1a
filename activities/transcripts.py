"""What a worker keeps of the prompts it serves, so a model round's input carries only what is new.

- `TranscriptCache`: each running prompt's transcript (earlier prompts + outputs) as of its last round here,
  with each output's projection into model messages; a round's input brings only the changes since the
  previous round, and only those outputs are projected again.
- `RecentOutputs`: large tool outputs this worker produced, by content digest; the next round receives them
  by reference (the worker that ran the tool usually runs the next round).
- `HistoryChain`: a conversation's earlier prompts, a chain of content-addressed links in the store, loaded
  once per worker and kept (links never change), with their projection into model messages (each earlier
  prompt is projected once per worker, not once per round).

Nothing here queries a workflow: what a worker lacks (another worker ran the last round, a restart, an
output produced elsewhere) raises `TranscriptMissing`, and the workflow sends that round's input whole.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError
from pydantic import JsonValue

from durable_agent.agent.messages import Message
from durable_agent.agent.models import Prompt, PromptOutput
from durable_agent.agent.projection import project_output, project_prompt
from durable_agent.workflows.protocol import HistoryLink, HistoryRef, OutputChange, RoundInput
from durable_agent.workflows.transcript import apply_changes, json_digest, large_output, with_output

K = TypeVar("K")
V = TypeVar("V")
LoadLink = Callable[[str], Awaitable[HistoryLink]]


class TranscriptMissing(LookupError):
    """This worker lacks part of the round's input; the workflow must send it whole."""


class HistoryBroken(LookupError):
    """A stored history link is missing or does not match its reference: nothing can rebuild it."""


@dataclass(frozen=True)
class History:
    """Earlier prompts and their projection into model messages (what `project_prompts` makes of them)."""

    records: list[Prompt]
    messages: list[Message]

    def extended(self, records: list[Prompt]) -> History:
        if not records:
            return self
        return History([*self.records, *records],
                       [*self.messages, *(m for record in records for m in project_prompt(record))])


EMPTY_HISTORY = History([], [])


@dataclass(frozen=True)
class Transcript:
    history: History
    outputs: list[PromptOutput]
    projected: list[list[Message]]  # each output's `project_output`, aligned with `outputs`

    @property
    def messages(self) -> list[Message]:
        """The current prompt's outputs as model messages: `project_prompt` without the user's input."""
        return [message for messages in self.projected for message in messages]


class _Lru(Generic[K, V]):
    def __init__(self, max_items: int) -> None:
        self._items: OrderedDict[K, V] = OrderedDict()
        self._max = max_items

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


class RecentOutputs:
    """Large tool outputs by content digest, the most recent `max_items`."""

    def __init__(self, max_items: int = 2048) -> None:
        self._outputs: _Lru[str, JsonValue] = _Lru(max_items)

    def remember(self, result: object) -> None:
        output = large_output(result)
        if output is not None:
            self._outputs.put(json_digest(output), output)

    def get(self, digest: str) -> JsonValue:
        output = self._outputs.get(digest)
        if output is None:
            raise TranscriptMissing(f"tool output {digest[:12]} was produced on another worker")
        return output


class HistoryChain:
    """Resolves a `HistoryRef` to its prompt records: links from this worker's cache, the rest from the store."""

    def __init__(self, max_links: int = 50_000, max_lists: int = 256) -> None:
        self._links: _Lru[str, HistoryLink] = _Lru(max_links)
        self._lists: _Lru[str, History] = _Lru(max_lists)
        self.loads = 0

    def add(self, ref: str, link: HistoryLink) -> None:
        self._links.put(ref, link)

    async def resolve(self, head: HistoryRef, load: LoadLink) -> History:
        cached = self._lists.get(head.ref)
        if cached is not None:
            return cached
        pending: list[HistoryLink] = []  # newest first, down to a history this worker already has
        base = EMPTY_HISTORY
        current: HistoryRef | None = head
        while current is not None:
            if (known := self._lists.get(current.ref)) is not None:
                base = known
                break
            link = self._links.get(current.ref) or await self._load(current.ref, load)
            pending.append(link)
            current = link.parent
        history = base.extended([record for link in reversed(pending) for record in link.records])
        if len(history.records) != head.count:
            raise HistoryBroken(f"history {head.ref} should hold {head.count} prompts, "
                                f"its links hold {len(history.records)}")
        self._lists.put(head.ref, history)
        return history

    async def _load(self, ref: str, load: LoadLink) -> HistoryLink:
        try:
            link = await load(ref)
        except (FileNotFoundError, LookupError) as exc:
            raise HistoryBroken(f"history link {ref} is not in the store: {exc}") from exc
        except (ValueError, DecodeError) as exc:
            raise HistoryBroken(f"history link {ref} is not readable: {exc}") from exc
        self.loads += 1
        self._links.put(ref, link)
        return link


@dataclass
class _Entry:
    round: int  # the round the transcript was built for
    transcript: Transcript


@dataclass
class TranscriptCache:
    """Each running prompt's transcript as of its last round on this worker, the most recent `max_prompts`."""

    history: HistoryChain = field(default_factory=HistoryChain)
    outputs: RecentOutputs = field(default_factory=RecentOutputs)
    max_prompts: int = 128
    misses: int = 0  # rounds this worker could not rebuild (the workflow then sends them whole)
    _entries: _Lru[tuple[str, str], _Entry] = field(init=False)

    def __post_init__(self) -> None:
        self._entries = _Lru(self.max_prompts)

    async def load(self, workflow_id: str, inp: RoundInput,
                   load_link: LoadLink) -> Transcript:
        """The earlier prompts and the current outputs as of this round; `TranscriptMissing` when this worker
        cannot rebuild them from its cache and the input."""
        key = (workflow_id, inp.run_id)
        entry = self._entries.get(key)
        if inp.changes is None:  # sent whole
            history = (await self._chain(inp, load_link)).extended(list(inp.history))
            outputs = list(inp.prompt.output)
        else:
            history = await self._history(inp, entry, load_link)
            outputs = self._outputs(inp, entry)
        transcript = Transcript(history, outputs, _projected(outputs, entry))
        self._entries.put(key, _Entry(inp.round, transcript))
        return transcript

    async def _chain(self, inp: RoundInput, load_link: LoadLink) -> History:
        return await self.history.resolve(inp.history_ref, load_link) if inp.history_ref else EMPTY_HISTORY

    async def _history(self, inp: RoundInput, entry: _Entry | None, load_link: LoadLink) -> History:
        if inp.history:
            history = (await self._chain(inp, load_link)).extended(list(inp.history))
        elif entry is not None and len(entry.transcript.history.records) == inp.history_count:
            history = entry.transcript.history
        else:
            history = await self._chain(inp, load_link)
        if len(history.records) != inp.history_count:
            self.misses += 1
            raise TranscriptMissing(f"{inp.history_count} earlier prompts expected, "
                                    f"{len(history.records)} known here")
        return history

    def _outputs(self, inp: RoundInput, entry: _Entry | None) -> list[PromptOutput]:
        assert inp.changes is not None
        current = entry is not None and entry.round in (inp.round - 1, inp.round)
        outputs = list(entry.transcript.outputs) if current and entry is not None else []
        try:
            changes = [self._resolved(change) for change in inp.changes]
        except TranscriptMissing:
            self.misses += 1
            raise
        if not apply_changes(outputs, changes) or len(outputs) != inp.output_count:
            self.misses += 1
            raise TranscriptMissing(f"round {inp.round}: this worker did not run the prompt's previous round")
        return outputs

    def _resolved(self, change: OutputChange) -> OutputChange:
        if change.result_ref is None:
            return change
        output = self.outputs.get(change.result_ref)
        return OutputChange(index=change.index, output=with_output(change, output))

    def clear(self) -> None:
        """Forget everything (what a restarted worker knows)."""
        self._entries = _Lru(self.max_prompts)
        self.history = HistoryChain()
        self.outputs = RecentOutputs()


def _projected(outputs: list[PromptOutput], entry: _Entry | None) -> list[list[Message]]:
    """Each output's messages: kept from the last round for the outputs that are still the same objects (a change
    replaces an output, never alters it), projected for the rest. A round at output N then projects what changed,
    not all N outputs again."""
    earlier, known = (entry.transcript.outputs, entry.transcript.projected) if entry is not None else ([], [])
    return [known[i] if i < len(earlier) and earlier[i] is output else project_output(output)
            for i, output in enumerate(outputs)]
