"""What `dagent run --no-interactive` prints for a prompt waiting for decisions: each call, and the commands that
decide it as they would be accepted, with `--by`/`--role` (and `"by"`/`"roles"` in the raw signal) when the
call names its approvers."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from durable_agent.agent.models import ApprovalRequest
from durable_agent.cli.render import short
from durable_agent.workflows.protocol import PendingApproval

if TYPE_CHECKING:
    from durable_agent.cli.follow import LiveView
    from durable_agent.client import PromptHandle

LOGIN_USER = os.environ.get("USER", "cli")  # `dagent approve --by`'s default


def decider(approvers: Sequence[str] | None) -> tuple[str, dict[str, object]]:
    """The `dagent approve` flags and the signal's fields a decision on a call with these `approvers` needs (the
    first one that names a person, else the first role): `--by bob` for `user:bob`; `--role finance` for
    `role:finance`, deciding as the login user. No approvers: anyone may decide, as the login user."""
    people = [a.removeprefix("user:") for a in approvers or () if a.startswith("user:")]
    roles = [a.removeprefix("role:") for a in approvers or () if a.startswith("role:")]
    if people:
        return f" --by {people[0]}", {"by": people[0]}
    if roles:
        return f" --role {roles[0]}", {"by": LOGIN_USER, "roles": [roles[0]]}
    return "", {"by": LOGIN_USER}


async def print_decision_commands(view: LiveView, handle: PromptHandle) -> None:
    """Every call waiting now (the prompt's own list: a batch, a sub-agent's calls) and how to decide it."""
    try:
        pending = await handle.pending_approvals()
    except Exception:  # no worker answers queries: what the events said
        pending = []
    if not pending:
        pending = [PendingApproval(tool_call_id=entry.id, tool=entry.tool, input=entry.input,
                                   reason=entry.result.reason, requested_at=entry.result.requested_at,
                                   approvers=entry.result.approvers)
                   for _, entry in sorted(view.waiting.values(), key=lambda item: item[0])
                   if isinstance(entry.result, ApprovalRequest)]
    if not pending:
        return
    prompt_id, first = handle.id, pending[0]
    flags, fields = decider(first.approvers)
    if len(pending) > 1:
        view.line(f"The prompt is waiting for {len(pending)} decisions; it goes on once every one is in:",
                  style="yellow")
        for call in pending:
            view.line(f"  {call.tool_call_id}  {call.tool} {short(call.input)} — {call.reason}")
        view.line("Decide each with one of:", style="yellow")
        for call in pending:
            view.line(f"  dagent approve {prompt_id} {call.tool_call_id}{decider(call.approvers)[0]}")
    else:
        view.line("The prompt is waiting for approval. Decide with one of:", style="yellow")
        view.line(f"  dagent approve {prompt_id} {first.tool_call_id}{flags}")
    signal = json.dumps({"tool_call_id": first.tool_call_id, **fields})
    view.line(f"  dagent reject {prompt_id} {first.tool_call_id}{flags} --reason 'not now'")
    view.line(f"  temporal workflow signal -w {prompt_id} --name approve --input '{signal}'")
    if len(pending) > 1:
        view.line("or every call at once:", style="yellow")
        view.line(f"  dagent approve {prompt_id} --all{flags}")
        view.line(f"  dagent reject {prompt_id} --all{flags} --reason 'not now'")
