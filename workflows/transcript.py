"""A prompt's transcript between workflow and worker: which outputs travel by reference, applying a round's
changes, and paging the whole transcript for the `transcript` query (tools and debugging; no worker uses it).

Pure functions, used by the workflow and the model activity alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from itertools import chain, islice

from pydantic import JsonValue

from durable_agent.agent.models import Prompt, PromptOutput, ToolOutput, ToolSuccess
from durable_agent.workflows.protocol import OutputChange, TranscriptItem, TranscriptPage

OUTPUT_REF_MIN_BYTES = 1024  # smaller tool outputs travel by value: a reference would not be much smaller


def json_digest(value: JsonValue) -> str:
    """sha256 of the canonical JSON of `value` (the same in workflow, worker and API): the content digest of
    a tool's output, and the hash of corrected arguments in a decision token."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def large_output(result: object) -> JsonValue | None:
    """A successful tool result's output when it is large enough to travel by reference."""
    if not isinstance(result, ToolSuccess) or isinstance(result.output, bool | int | float | None):
        return None
    output = result.output
    if isinstance(output, str):
        return output if len(output) >= OUTPUT_REF_MIN_BYTES else None
    return output if len(json.dumps(output, ensure_ascii=False)) >= OUTPUT_REF_MIN_BYTES else None


def change_for(index: int, entry: PromptOutput) -> OutputChange:
    """A changed output entry as the next round receives it: a large tool output by reference (a tool activity's
    success: sub-agent answers never pass through a tool activity)."""
    if not isinstance(entry, ToolOutput) or entry.child_prompt_id is not None \
            or (output := large_output(entry.result)) is None:
        return OutputChange(index=index, output=entry)
    bare = entry.model_copy(update={"result": ToolSuccess(output=None)})
    return OutputChange(index=index, output=bare, result_ref=json_digest(output))


def with_output(change: OutputChange, output: JsonValue) -> PromptOutput:
    """The change's entry with its referenced tool output put back."""
    assert isinstance(change.output, ToolOutput)
    return change.output.model_copy(update={"result": ToolSuccess(output=output)})


def build_page(history: Sequence[Prompt], outputs: Sequence[PromptOutput], start: int,
               max_bytes: int) -> TranscriptPage:
    """Items from `start` until about `max_bytes` of JSON (always at least one item)."""
    flat = chain(((n, entry) for n, prompt in enumerate(history) for entry in prompt.output),
                 ((len(history), entry) for entry in outputs))
    items: list[TranscriptItem] = []
    used, cursor = 0, start
    total = sum(len(p.output) for p in history) + len(outputs)
    for prompt_index, entry in islice(flat, start, None):
        size = len(entry.model_dump_json())
        if items and used + size > max_bytes:
            break
        items.append(TranscriptItem(prompt=prompt_index, output=entry))
        used += size
        cursor += 1
    headers = [p.model_copy(update={"output": [], "audit": []}) for p in history] if start == 0 else []
    return TranscriptPage(history=headers, history_count=len(history), output_count=len(outputs), items=items,
                          next_start=cursor if cursor < total else None)


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
