"""The worker's copy of each running prompt's transcript, so the model round's input carries only changes.

A hit (this worker ran the prompt's previous round) costs nothing; a miss (first round with history,
another worker ran the last round, a restarted worker) reads the transcript back from the workflow with
the `transcript` query, page by page. Queries write nothing to history.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.models import Prompt, PromptOutput
from workflows.protocol import RoundInput, TranscriptPage, TranscriptPageRequest
from workflows.transcript import apply_changes, assemble

FetchPage = Callable[[RoundInput, TranscriptPageRequest], Awaitable[TranscriptPage]]


@dataclass
class _Entry:
    round: int
    history: list[Prompt]
    outputs: list[PromptOutput]


class TranscriptCache:
    def __init__(self, fetch_page: FetchPage, *, max_prompts: int = 128, page_bytes: int = 1_000_000) -> None:
        self._fetch_page = fetch_page
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._max_prompts = max_prompts
        self._page_bytes = page_bytes
        self.hits = 0
        self.misses = 0

    async def load(self, workflow_id: str, inp: RoundInput) -> tuple[list[Prompt], list[PromptOutput]]:
        """The history prompts and the current outputs as of this round."""
        if inp.changes is None:  # an older workflow sent everything
            return list(inp.history), list(inp.prompt.output)
        key = (workflow_id, inp.run_id)
        entry = self._entries.get(key)
        if entry is None and inp.history_count == 0 and inp.round == 1:
            entry = _Entry(round=0, history=[], outputs=[])
        if entry is not None and entry.round in (inp.round - 1, inp.round):
            outputs = list(entry.outputs)
            if apply_changes(outputs, inp.changes) and len(outputs) == inp.output_count \
                    and len(entry.history) == inp.history_count:
                self.hits += 1
                return self._keep(key, _Entry(inp.round, entry.history, outputs))
        self.misses += 1
        pages = [await self._fetch_page(inp, TranscriptPageRequest(start=0, max_bytes=self._page_bytes))]
        while pages[-1].next_start is not None:
            request = TranscriptPageRequest(start=pages[-1].next_start, max_bytes=self._page_bytes)
            pages.append(await self._fetch_page(inp, request))
        history, outputs = assemble(pages)
        return self._keep(key, _Entry(inp.round, history, outputs))

    def _keep(self, key: tuple[str, str], entry: _Entry) -> tuple[list[Prompt], list[PromptOutput]]:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_prompts:
            self._entries.popitem(last=False)
        return entry.history, entry.outputs

    def forget(self, workflow_id: str, run_id: str) -> None:
        self._entries.pop((workflow_id, run_id), None)
