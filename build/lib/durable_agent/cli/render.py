"""Turning prompt records into short human-readable lines for the terminal."""

from __future__ import annotations

import json
from typing import assert_never

from pydantic import JsonValue

from durable_agent.agent.models import (
    DataOutput,
    FileOutput,
    MessageOutput,
    Prompt,
    PromptOutput,
    ReasoningOutput,
    TextOutput,
    ToolOutput,
    WidgetOutput,
)

MAX_VALUE_CHARS = 160


def short(value: JsonValue, limit: int = MAX_VALUE_CHARS) -> str:
    rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return rendered if len(rendered) <= limit else rendered[: limit - 1] + "…"


def describe_output(entry: PromptOutput) -> str:
    match entry:
        case TextOutput():
            return f"text    {entry.text}"
        case ToolOutput():
            head = f"tool    {entry.tool} {short(entry.input)} [{entry.id}]"
            result = entry.result
            decided = ""
            if entry.decision is not None and (result is None or result.type != "pending"):
                decision = entry.decision
                decided = f"  ({decision.decision}{f' by {decision.by}' if decision.by else ''} " \
                          f"at {decision.at:%H:%M:%S})"
            if result is None:
                return f"{head} → running{decided}"
            match result.type:
                case "success":
                    return f"{head} → {short(result.output)}{decided}"
                case "error":
                    return f"{head} → error: {result.error}{decided}"
                case "pending":
                    return f"{head} → waiting for approval: {result.reason}"
        case FileOutput():
            return f"file    {entry.name} ({entry.media_type}, {entry.size} bytes) {entry.content_ref}"
        case WidgetOutput():
            return f"widget  {entry.widget}: {entry.fallback_text or short(entry.data)}"
        case DataOutput():
            return f"data    {short(entry.data)}"
        case MessageOutput():
            return f"{entry.role:<7} {entry.text}"
        case ReasoningOutput():
            return f"reason  {entry.summary or '(reasoning not shown)'}"
        case _:
            assert_never(entry)
    return ""


def describe_prompt(prompt: Prompt) -> list[str]:
    lines = [
        f"prompt  {prompt.id}  state={prompt.state}  user={prompt.user_id}  rounds={prompt.rounds}",
        f"input   {prompt.input if prompt.input is not None else '(none: system-initiated)'}",
    ]
    lines += [describe_output(o) for o in prompt.output]
    usage = prompt.usage
    lines.append(f"usage   {usage.model_calls} model calls, {usage.input_tokens} in / {usage.output_tokens} out "
                 f"tokens" + (f", ${usage.cost:.4f}" if usage.cost is not None else ""))
    if prompt.force_completed:
        lines.append("note    force-completed after max_rounds")
    if prompt.error:
        lines.append(f"error   {prompt.error}")
    if prompt.trace_id:
        lines.append(f"trace   {prompt.trace_id}")
    return lines
