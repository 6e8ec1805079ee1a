"""Words for the Temporal UI: what a prompt is doing now (current details) and its one-line summary.

Pure functions of the prompt record, so the workflow can call them on every step: current details and
summaries are metadata, not commands, and never change how a history replays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import JsonValue

from durable_agent.agent.models import ApprovalRequest, Decision, Prompt, TextOutput, ToolOutput
from durable_agent.agent.stops import people_words

MAX_SUMMARY_CHARS = 120
MAX_ARGS_CHARS = 200
# A string shown without quotes: letters, digits and these (`\w` is `str.isalnum()` plus `_`, also listed).
_SIMPLE_STRING = re.compile(r"[\w ._\-/@$€£%]+")
_JSON_CONSTANTS = {None: "null", True: "true", False: "false"}


def cut_at_word(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    space = head.rfind(" ")
    if flat[limit - 1] != " " and space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.-") + "…"


def _scalar(value: JsonValue) -> str:
    """As JSON, but a simple string without quotes. Runs for every tool call's arguments (its summary and the
    current details), so the common cases skip `json.dumps`."""
    if isinstance(value, str):
        return value if _SIMPLE_STRING.fullmatch(value) else json.dumps(value, ensure_ascii=False)
    if value is None or type(value) is bool:
        return _JSON_CONSTANTS[value]
    if type(value) is int:
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def compact_args(value: JsonValue, limit: int = MAX_ARGS_CHARS) -> str:
    """Arguments as a person writes them: `{to: ACME, amount: 480}`."""
    if isinstance(value, dict):
        text = "{" + ", ".join(f"{key}: {compact_args(item, limit)}" for key, item in value.items()) + "}"
    elif isinstance(value, list):
        text = "[" + ", ".join(compact_args(item, limit) for item in value) + "]"
    else:
        text = _scalar(value)
    return cut_at_word(text, limit) if len(text) > limit else text


def prompt_summary(user_id: str, input: str | None) -> str:
    """The static summary shown in the Temporal UI: who asked what, cut at a word boundary."""
    return cut_at_word(f"{user_id}: {input if input is not None else '(system-initiated prompt)'}",
                       MAX_SUMMARY_CHARS)


STATIC_DETAILS_INPUT_CHARS = 4_000  # the UI's details field shows this much; the workflow input has it all


def prompt_static_details(user_id: str, input: str | None) -> str:
    """The input for the UI's details field (the summary is cut at a word; this is cut much later, so a big
    input is not stored a second time beside the workflow's own input)."""
    if input is None:
        shown = "(system-initiated: no user message)"
    elif len(input) > STATIC_DETAILS_INPUT_CHARS:
        shown = f"{input[:STATIC_DETAILS_INPUT_CHARS]}… ({len(input):,} characters in all: see the workflow's input)"
    else:
        shown = input
    return f"**Prompt by {user_id}**\n\n{shown}"


def calling_model(prompt: Prompt, round_number: int) -> str:
    return f"Round {round_number}: calling model {prompt.model}"


def running_tool(round_number: int, entry: ToolOutput) -> str:
    return f"Round {round_number}: running tool {entry.tool} {compact_args(entry.input)}"


def decided(decision: Decision) -> str:
    by = f" by {decision.by}" if decision.by else ""
    reason = f" ({decision.reason})" if decision.reason else ""
    return f"{decision.decision}{by}{reason}"


def waiting_for_approval(prompt: Prompt, waiting: Sequence[ToolOutput], *, signed: bool = False) -> str:
    """The headline of a waiting prompt, naming every call that waits (a batch: all of them), with what a person
    needs to decide them from the UI (Markdown: payloads in code spans, so the UI shows them with straight
    quotes, ready to copy). `signed`: this deployment takes only signed decisions (the HTTP API signs them, for
    the inbox and for `dagent approve` with an API key), so the update form is not offered: a payload typed
    here is always refused."""
    calls = [entry for entry in waiting if isinstance(entry.result, ApprovalRequest)]
    if not calls:
        return f"Waiting for approval ({prompt.id})"
    first, request = calls[0], calls[0].result
    assert isinstance(request, ApprovalRequest)
    if len(calls) == 1:
        paragraphs = [f"**Waiting for approval**: {_call_line(first)} — reason: {request.reason}",
                      _requested(first) + "."]
    else:
        paragraphs = [f"**Waiting for approval** of {len(calls)} calls (the prompt goes on once every one is "
                      "decided; each is decided on its own):",
                      "\n".join(f"{n}. {_call_line(entry)} — reason: {entry.result.reason} "  # type: ignore[union-attr]
                                f"({_requested(entry)})" for n, entry in enumerate(calls, 1))]
    every = f" — or every call at once: `dagent approve {prompt.id} --all`" if len(calls) > 1 else ""
    if signed:
        paragraphs.append(
            f"Decisions here must be signed: decide with `dagent approve {prompt.id} {first.id}`{every} (with "
            "`DAGENT_API_URL` and your `DAGENT_API_KEY` set, it decides through the HTTP API) or in the inbox "
            "(`dagent api`, page `/inbox`): the API signs the decision for the person its key names. An update "
            "sent from this page is refused.")
        return "\n\n".join(paragraphs)
    approvers = list(request.approvers or ())
    roles = [a.removeprefix("role:") for a in approvers if a.startswith("role:")]  # `role:finance` → `finance`
    acting = {"roles": roles} if roles else {}
    approve = json.dumps({"tool_call_id": first.id, "by": "YOUR-NAME", **acting})
    reject = json.dumps({"tool_call_id": first.id, "by": "YOUR-NAME", **acting, "reason": "WHY"})
    per_call = " (one update per call: change `tool_call_id`)" if len(calls) > 1 else ""
    as_role = "".join(f" --role {role}" for role in roles)
    paragraphs += [
        f"Approve with update `approve_call` and payload `{approve}`{per_call} (More Actions → Send an Update; add "
        '`"input": {…}` to correct the arguments).',
        f"Reject with update `reject_call` and payload `{reject}`.",
        f"From a terminal: `dagent approve {prompt.id} {first.id}{' --by YOUR-NAME' + as_role if roles else ''}`"
        f"{every}",
    ]
    if roles:
        paragraphs.insert(-3, f"{'It' if len(calls) == 1 else 'The first call'} is decided by "
                              f"{people_words(approvers)}: say the role you act in with "
                              f"`\"roles\": {json.dumps(roles)}` in the payload "
                              f"(`{as_role.strip()}` from a terminal); your name alone is refused.")
    return "\n\n".join(paragraphs)


def _call_line(entry: ToolOutput) -> str:
    return f"{entry.tool} {compact_args(entry.input)}"


def _requested(entry: ToolOutput) -> str:
    pending = entry.result
    assert isinstance(pending, ApprovalRequest)
    text = f"Call `{entry.id}`, requested {pending.requested_at:%Y-%m-%d %H:%M:%S} UTC"
    if pending.expires_at:
        text += f", expires {pending.expires_at:%Y-%m-%d %H:%M:%S} UTC"
    if pending.approvers:
        text += f"; approvers: {', '.join(pending.approvers)}"
    return text


def finished(prompt: Prompt) -> str:
    if prompt.state == "completed":
        rounds = f"after {prompt.rounds} round{'s' if prompt.rounds != 1 else ''}"
        answer = next((o.text for o in reversed(prompt.output) if isinstance(o, TextOutput)), None)
        return f"Completed {rounds}" + (f": {cut_at_word(answer, 300)}" if answer else ".")
    if prompt.state == "stopped":
        return prompt.stop.words() if prompt.stop else "Stopped before its work was done."
    if prompt.state == "failed":
        return f"Failed: {prompt.error or 'unknown error'}"
    if prompt.state == "cancelled":
        return "Cancelled."
    return prompt.state
