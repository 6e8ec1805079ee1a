"""Paging a prompt's transcript (history + outputs) for the worker, and rebuilding it from pages or changes.

Pure functions: the workflow's `transcript` query uses `build_page`; the model activity uses the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.models import Prompt, PromptOutput
from workflows.protocol import OutputChange, TranscriptItem, TranscriptPage


def build_page(history: Sequence[Prompt], outputs: Sequence[PromptOutput], start: int,
               max_bytes: int) -> TranscriptPage:
    """Items from `start` until about `max_bytes` of JSON (always at least one item)."""
    flat_sizes = [len(p.output) for p in history]
    position, prompt_index = 0, 0
    while prompt_index < len(history) and position + flat_sizes[prompt_index] <= start:
        position += flat_sizes[prompt_index]
        prompt_index += 1
    items: list[TranscriptItem] = []
    used, cursor = 0, start
    total = sum(flat_sizes) + len(outputs)
    while cursor < total:
        if prompt_index < len(history):
            entry = history[prompt_index].output[cursor - position]
        else:
            entry = outputs[cursor - position]
        size = len(entry.model_dump_json())
        if items and used + size > max_bytes:
            break
        items.append(TranscriptItem(prompt=prompt_index, output=entry))
        used += size
        cursor += 1
        while prompt_index < len(history) and cursor - position >= flat_sizes[prompt_index]:
            position += flat_sizes[prompt_index]
            prompt_index += 1
    headers = [p.model_copy(update={"output": [], "audit": []}) for p in history] if start == 0 else []
    return TranscriptPage(history=headers, history_count=len(history), output_count=len(outputs), items=items,
                          next_start=cursor if cursor < total else None)


def assemble(pages: Sequence[TranscriptPage]) -> tuple[list[Prompt], list[PromptOutput]]:
    """History prompts (with their outputs) and the current prompt's outputs, from all pages in order."""
    history = [p.model_copy(update={"output": []}) for p in pages[0].history]
    outputs: list[PromptOutput] = []
    for page in pages:
        for item in page.items:
            (history[item.prompt].output if item.prompt < len(history) else outputs).append(item.output)
    return history, outputs


def apply_changes(outputs: list[PromptOutput], changes: Sequence[OutputChange]) -> bool:
    """Apply changes in place; False when they do not fit (the cache missed a round)."""
    for change in changes:
        if change.index < len(outputs):
            outputs[change.index] = change.output
        elif change.index == len(outputs):
            outputs.append(change.output)
        else:
            return False
    return True
