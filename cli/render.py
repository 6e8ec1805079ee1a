"""Turning prompt records into short human-readable lines for the terminal."""

from __future__ import annotations

import json
from typing import assert_never

from pydantic import JsonValue

from durable_agent.agent import models as m
from durable_agent.agent.models import Decision, Prompt, PromptOutput
from durable_agent.agent.notify import NoticeSent

MAX_VALUE_CHARS = 160


def state_words(state: str | None) -> str:
    """A prompt state as people read it (`waiting for approval`, as the pages say it); `--json` keeps the wire
    name. The other states read as their names (`running`, `completed`, …): the words `dagent ls --state` takes."""
    return (state or "").replace("_", " ")


def short(value: JsonValue, limit: int = MAX_VALUE_CHARS) -> str:
    rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return rendered if len(rendered) <= limit else rendered[: limit - 1] + "…"


def correction_words(original: JsonValue, corrected: JsonValue, by: str | None = None) -> str:
    """What an approver changed in a call's arguments: `amount changed 480 → 450 by alice` ('' if nothing)."""
    changes: list[str] = []
    if isinstance(original, dict) and isinstance(corrected, dict):
        for key in [*original, *(k for k in corrected if k not in original)]:
            before, after = original.get(key), corrected.get(key)
            if key not in corrected:
                changes.append(f"{key} removed (was {short(before, 40)})")
            elif key not in original:
                changes.append(f"{key} set to {short(after, 40)}")
            elif before != after:
                changes.append(f"{key} changed {short(before, 40)} → {short(after, 40)}")
    elif original != corrected:
        changes.append(f"arguments changed {short(original, 60)} → {short(corrected, 60)}")
    if not changes:
        return ""
    return ", ".join(changes) + (f" by {by}" if by else "")


def decision_words(decision: Decision, corrected_input: JsonValue = None) -> str:
    """`approved by alice at 11:05:11 (amount changed 480 → 450 by alice)`; a rejection with its reason."""
    by = f" by {decision.by}" if decision.by else ""
    reason = f": {decision.reason}" if decision.reason and decision.decision != "approved" else ""
    words = f"{decision.decision}{by} at {decision.at:%H:%M:%S}{reason}"
    if decision.original_input is not None:
        changed = correction_words(decision.original_input, corrected_input, decision.by)
        words += f" ({changed})" if changed else ""
    return words


def taken_words(entry: m.ToolOutput, others_waiting: int) -> str:
    """A decision taken on a call that has not run yet because other calls of its batch still wait for theirs:
    `approved by alice at 11:05:11; runs when the other 2 decisions are in`."""
    assert entry.decision is not None
    words = decision_words(entry.decision, entry.input)
    if entry.decision.decision != "approved":
        return words + ("; the model hears of it once the rest of its batch is decided" if others_waiting else "")
    if not others_waiting:
        return words + "; runs now"
    return words + f"; runs when the other {others_waiting} decision{'s are' if others_waiting > 1 else ' is'} in"


def undecided_calls(prompt: Prompt) -> int | None:
    """How many calls of a waiting prompt still wait for a decision (None: the prompt is not waiting)."""
    if prompt.state != "waiting_for_approval":
        return None
    return sum(1 for o in prompt.output if isinstance(o, m.ToolOutput) and o.result is not None
               and o.result.type == "pending" and o.decision is None)


def describe_output(entry: PromptOutput, undecided: int | None = None) -> str:
    """One entry as a line. `undecided`: the prompt waits for that many decisions, so a call that has its
    decision but no result yet waits for them (it is said so), rather than running or waiting itself."""
    match entry:
        case m.TextOutput():
            return f"text    {entry.text}"
        case m.ToolOutput():
            head = f"tool    {entry.tool} {short(entry.input)} [{entry.id}]"
            result = entry.result
            if undecided is not None and entry.decision is not None and (result is None or result.type == "pending"):
                return f"{head} → {taken_words(entry, undecided)}"
            decided = ""
            if entry.decision is not None and (result is None or result.type != "pending"):
                decision = entry.decision
                decided = f"  ({decision.decision}{f' by {decision.by}' if decision.by else ''} " \
                          f"at {decision.at:%H:%M:%S})"
                if decision.original_input is not None and \
                        (changed := correction_words(decision.original_input, entry.input, decision.by)):
                    decided += f"  ({changed})"
            if result is None:
                return f"{head} → running{decided}"
            match result.type:
                case "success":
                    return f"{head} → {short(result.output)}{decided}"
                case "error":
                    return f"{head} → error: {result.error}{decided}"
                case "pending":
                    return f"{head} → waiting for approval: {result.reason}"
        case m.FileOutput():
            return f"file    {entry.name} ({entry.media_type}, {entry.size} bytes): {entry.summary}"
        case m.WidgetOutput():
            return f"widget  {entry.widget}: {entry.fallback_text or short(entry.data)}"
        case m.DataOutput():
            return f"data    {short(entry.data)}"
        case m.MessageOutput():
            return f"{entry.role:<7} {entry.text}"
        case m.ReasoningOutput():
            return f"reason  {entry.summary or '(reasoning not shown)'}"
        case _:
            assert_never(entry)
    return ""


def notice_line(sent: NoticeSent) -> str:
    """Who was told of a waiting call (docs/telling-approvers.md): `told    slack reminder-1 -> UFIN at 09:00:00`."""
    whom = ", ".join(sent.to) or "nobody"
    outcome = f" -> {whom}" if sent.ok else f" FAILED: {sent.error}"
    unreached = f" (not reached: {', '.join(sent.unreached)})" if sent.unreached else ""
    return f"told    {sent.channel} {sent.step}{outcome} at {sent.at:%Y-%m-%d %H:%M:%S}{unreached}"


def describe_prompt(prompt: Prompt) -> list[str]:
    lines = [
        f"prompt  {prompt.id}  state={state_words(prompt.state)}  user={prompt.user_id}  rounds={prompt.rounds}",
        f"input   {prompt.input if prompt.input is not None else '(none: system-initiated)'}",
    ]
    undecided = undecided_calls(prompt)
    for output in prompt.output:
        lines.append(describe_output(output, undecided))
        if isinstance(output, m.ToolOutput):
            lines += [notice_line(sent) for sent in output.notifications]
    usage = prompt.usage
    lines.append(f"usage   {usage.model_calls} model calls, {usage.input_tokens} in / {usage.output_tokens} out "
                 f"tokens" + (f", ${usage.cost:.4f}" if usage.cost is not None else ""))
    for standing in prompt.budgets:  # spend against each period budget, as of the prompt's last round
        limit = standing.limit
        spent = [f"{standing.spent_tokens} of {limit.max_tokens + standing.extra_tokens} tokens"
                 if limit and limit.max_tokens else "",
                 f"{standing.spent_cost:.4f} of {limit.max_cost + standing.extra_cost:g} cost"
                 if limit and limit.max_cost else ""]
        lines.append(f"budget  {standing.principal}: {', '.join(p for p in spent if p) or 'no budget'}"
                     + (f" this {limit.period}" if limit else ""))
    if prompt.stop is not None:
        lines.append(f"stopped {prompt.stop.words().removeprefix('Stopped: ')}")
    elif prompt.budget_stop:
        lines.append(f"note    stopped: {prompt.budget_stop}")
    elif prompt.force_completed:
        lines.append("note    force-completed after max_rounds")
    if prompt.error:
        lines.append(f"error   {prompt.error}")
    if prompt.trace_id:
        lines.append(f"trace   {prompt.trace_id}")
    return lines
