"""Every call waiting for a decision across prompts, for the CLI's `dagent pending` and the API's inbox:
each addressed from its top prompt (a sub-agent's as `<call>/<call>` with the whole path).

Where the rows come from (the listing mechanics, kept apart from who may see a row): each prompt keeps its
waiting calls in its memo (workflows/pending_memo.py), so one visibility query (`list_workflows`) lists
every waiting prompt *with* its calls; no workflow is asked. A sub-agent's calls are listed from its top
prompt, whose memo carries them; the tops are found by `ParentPromptId` in list results, one visibility
query per level of sub-agents. A workflow query (a workflow task on the prompt's worker, bounded in time)
is left only for a prompt with no memo (started by an older version) and for a call too large for the memo.

Visibility is eventually consistent: a call decided a moment ago may still be listed, and one that started
waiting a moment ago may be missing until the next list. Deciding never trusts a row: the `approve_call` /
`reject_call` update (and the API's decide path) checks the call with the workflow itself and refuses a
stale one as already decided or not pending.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.identity import Identity, names
from durable_agent.agent.models import PromptRef
from durable_agent.workflows.names import CONVERSATION_ID, PARENT_PROMPT_ID, PROMPT_WORKFLOW, USER_ID
from durable_agent.workflows.pending_memo import (
    PENDING_MEMO_KEY,
    PendingMemo,
    read_pending_memo,
    read_plain_pending_memo,
)
from durable_agent.workflows.protocol import PendingApproval

if TYPE_CHECKING:
    from durable_agent.client._client import AgentClient

MAX_DEPTH = 32  # sub-agents of sub-agents: far more levels than any real agent uses
QUERY_SECONDS = 5.0  # how long the list waits for one prompt's worker to answer (prompts without a memo)
IDS_PER_QUERY = 100  # workflow ids per `WorkflowId IN (...)` visibility query
PAGE_SIZE = 1000  # the most a visibility list returns at once; also the largest page of `pending_list`


class PendingList(BaseModel):
    rows: list[PendingApproval] = Field(description=(
        "Each call as a person decides it: on its `prompt_id` (the top prompt) as its `tool_call_id`."))
    unanswered: list[str]  # waiting prompts whose worker did not answer in time: their calls are not listed
    # With a `limit` (one page): how many prompts wait in all (a visibility count), and the cursor of the next
    # page (None: this was the last).
    total: int | None = None
    next_cursor: str | None = None


class ListedPrompt(PromptRef):
    """A prompt as a visibility query lists it: its reference (owner "" when its search attributes lack one), its
    parent and its memo's waiting calls (None: no memo). Built unvalidated (`model_construct`): the fields come
    from the server's reply, and a list may hold thousands."""

    parent_id: str | None = None
    memo: PendingMemo | None = None


def may_see(row: PendingApproval, who: Identity, *, sees_everything: bool = False) -> bool:
    """Who sees a pending call (the inbox, `GET /approvals`, `dagent pending --as`): everyone who sees every
    prompt, the prompt's own user, and anyone the call's approvers name (as a user, or by one of their roles),
    without a global role. The one rule of who sees what; who may *decide* is `identity.may_decide`."""
    return sees_everything or (who.id is not None and row.user_id == who.id) or names(who, row.approvers)



# --- listing mechanics: where the rows come from ------------------------------------------------------


async def _memo_of(client: Client, info: WorkflowExecutionInfo) -> PendingMemo | None:
    """The prompt's waiting calls from its memo: parsed directly when plain JSON, else through the client's
    data converter (a codec, a payload stored outside history); None when it has no such memo."""
    payload = info.memo.fields.get(PENDING_MEMO_KEY)
    if payload is None:
        return None
    plain = read_plain_pending_memo(payload)
    if plain is not None:
        return plain
    [value] = await client.data_converter.decode([payload])
    return read_pending_memo(value)


def _keyword(info: WorkflowExecutionInfo, name: str) -> str | None:
    """A Keyword search attribute's value (its payload is always plain JSON: search attributes skip codecs)."""
    payload = info.search_attributes.indexed_fields.get(name)
    if payload is None:
        return None
    value = json.loads(payload.data)
    return value if isinstance(value, str) else None


async def list_page(client: Client, query: str, *, size: int = PAGE_SIZE, token: bytes = b"",
                    ) -> tuple[list[ListedPrompt], bytes]:
    """One page (at most `size`) of the prompts a visibility query finds, each with its memo's waiting calls,
    and the next page's token (empty: the last page). Read from the raw reply: `client.list_workflows` decodes
    every search attribute and memo of every row, twice for the search attributes, which was most of a
    10,000-row list."""
    try:
        page = await client.workflow_service.list_workflow_executions(ListWorkflowExecutionsRequest(
            namespace=client.namespace, query=query, page_size=size, next_page_token=token), retry=True)
    except RPCError as exc:
        # the server cannot read the token (the dev server's SQL visibility says UNKNOWN, others INVALID_ARGUMENT)
        if token and exc.status in (RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.UNKNOWN):
            raise ValueError(f"cursor {encode_cursor(token)!r} is not one this list gave (or it has expired): "
                             "start from the first page") from None
        raise
    found = [ListedPrompt.model_construct(
        prompt_id=info.execution.workflow_id, user_id=_keyword(info, USER_ID.name) or "",
        conversation_id=_keyword(info, CONVERSATION_ID.name), parent_id=_keyword(info, PARENT_PROMPT_ID.name),
        memo=await _memo_of(client, info)) for info in page.executions]
    return found, page.next_page_token


async def list_prompts_with_memo(client: Client, query: str) -> list[ListedPrompt]:
    """Every prompt a visibility query finds, each with its memo's waiting calls: `list_page` page by page."""
    found: list[ListedPrompt] = []
    token = b""
    while True:
        page, token = await list_page(client, query, token=token)
        found += page
        if not token:
            return found


def encode_cursor(token: bytes) -> str | None:
    """A page token as a cursor for a URL or a command line (None for the empty token: no next page)."""
    return base64.urlsafe_b64encode(token).decode().rstrip("=") if token else None


def decode_cursor(cursor: str | None) -> bytes:
    """The page token a cursor from `encode_cursor` carries; a malformed one is a one-line ValueError."""
    if not cursor:
        return b""
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"cursor {cursor[:40]!r} is not one this list gave") from None


def _quoted_ids(ids: Iterable[str]) -> str:
    return ", ".join("'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in ids)


async def list_ancestors(client: Client, listed: list[ListedPrompt]) -> dict[str, ListedPrompt]:
    """Every listed prompt and its running ancestors (sub-agents' parents, up to the top), by prompt id: one
    visibility query per level (and per `IDS_PER_QUERY` parents), never one call per prompt."""
    known = {entry.prompt_id: entry for entry in listed}
    asked: set[str] = set()
    for _ in range(MAX_DEPTH):
        wanted = sorted({e.parent_id for e in known.values() if e.parent_id} - known.keys() - asked)
        if not wanted:
            break
        asked.update(wanted)
        for start in range(0, len(wanted), IDS_PER_QUERY):
            query = (f"WorkflowType = '{PROMPT_WORKFLOW}' AND ExecutionStatus = 'Running' "
                     f"AND WorkflowId IN ({_quoted_ids(wanted[start:start + IDS_PER_QUERY])})")
            known.update((e.prompt_id, e) for e in await list_prompts_with_memo(client, query))
    return known


def top_of(prompt_id: str, known: dict[str, ListedPrompt]) -> str:
    """The highest running prompt above `prompt_id` among `known` (itself when it has no known parent)."""
    current = prompt_id
    for _ in range(MAX_DEPTH):
        parent = known[current].parent_id
        if parent is None or parent not in known:
            return current
        current = parent
    return current


async def calls_by_prompt(client: AgentClient, prompts: list[ListedPrompt], timeout: float,
                          ) -> tuple[dict[str, list[PendingApproval]], set[str]]:
    """Each prompt's waiting calls: from its memo; asked (each bounded by `timeout`, all at once) when it has none
    or left a call's detail out. A memo whose large details could not be fetched still lists its calls (without
    them). Also the prompts without a memo that did not answer."""
    memos = {p.prompt_id: p.memo for p in prompts}
    calls = {prompt_id: memo.calls for prompt_id, memo in memos.items() if memo is not None}
    to_ask = [prompt_id for prompt_id, memo in memos.items() if memo is None or memo.detail_omitted]

    async def ask(prompt_id: str) -> list[PendingApproval] | None:
        try:
            return await asyncio.wait_for(client.prompt(prompt_id).pending_approvals(), timeout)
        except (TimeoutError, RPCError):
            return None

    answers = dict(zip(to_ask, await asyncio.gather(*(ask(p) for p in to_ask)), strict=True))
    for prompt_id, answered in answers.items():
        memo = memos[prompt_id]
        if answered is None:
            continue
        if memo is None:
            calls[prompt_id] = answered
            continue
        detail = {call.tool_call_id: call for call in answered}
        calls[prompt_id] = [detail.get(c.tool_call_id, c) if c.tool_call_id in memo.detail_omitted else c
                            for c in memo.calls]
    return calls, {p for p, answered in answers.items() if answered is None and memos[p] is None}


# --- assembly: every call once, addressed from its top prompt -----------------------------------------


def _decided_on(call: PendingApproval, prompt_id: str, listed: ListedPrompt) -> PendingApproval:
    """The call as a person decides it: on `prompt_id`, owned by the user the visibility store names."""
    return call.model_copy(update={"prompt_id": prompt_id, "user_id": listed.user_id,
                                   "conversation_id": listed.conversation_id})


def assemble(waiting: list[ListedPrompt], tops: list[str], calls: dict[str, list[PendingApproval]],
             ) -> list[PendingApproval]:
    """Rows in list order: a top prompt's calls (its sub-agents' included) once; a waiting sub-agent's own
    calls that its top does not list (yet) under the sub-agent itself."""
    rows: list[PendingApproval] = []
    listed_tops: set[str] = set()
    for entry, top in zip(waiting, tops, strict=True):
        if top not in calls:
            continue
        if top not in listed_tops:
            listed_tops.add(top)
            rows += [_decided_on(call, top, entry) for call in calls[top]]
        if top == entry.prompt_id or entry.prompt_id not in calls:
            continue
        listed = {(call.path[-1], call.tool_call_id.rsplit("/", 1)[-1]) for call in calls[top] if call.path}
        rows += [_decided_on(call, entry.prompt_id, entry)
                 for call in calls[entry.prompt_id] if (entry.prompt_id, call.tool_call_id) not in listed]
    return rows


async def pending_list(client: AgentClient, user_id: str | None, *, timeout: float = QUERY_SECONDS,
                       limit: int | None = None, cursor: str | None = None) -> PendingList:
    """Every call waiting for a decision, once, addressed from its top prompt (a sub-agent's as `<call>/<call>`
    with the whole path), from visibility (see the module's docstring). A prompt that has to be asked and
    whose worker does not answer within `timeout` seconds is left out and named in `unanswered`.

    With `limit` (1 to `PAGE_SIZE`), one page: the calls of at most `limit` waiting prompts from `cursor` on
    (None: the first page), with `total` (waiting prompts in all) and `next_cursor`. A sub-agent listed on a
    later page than its top prompt lists the top's calls there again."""
    from durable_agent.client._client import prompt_query  # _client imports this module

    if limit is not None and not 1 <= limit <= PAGE_SIZE:
        raise ValueError(f"limit must be between 1 and {PAGE_SIZE}, not {limit}")
    # This deployment's prompts only: a namespace may hold other deployments' (other task queues, other workers).
    query = prompt_query(user_id=user_id or None, state="waiting_for_approval", running=True,
                         task_queue=client.settings.task_queue)
    total: int | None = None
    next_token = b""
    if limit is None:
        waiting = await list_prompts_with_memo(client.client, query)
    else:
        (waiting, next_token), counted = await asyncio.gather(
            list_page(client.client, query, size=limit, token=decode_cursor(cursor)),
            client.client.count_workflows(query))
        total = counted.count
    known = await list_ancestors(client.client, waiting)
    tops = [top_of(entry.prompt_id, known) for entry in waiting]
    involved = list(dict.fromkeys([*tops, *(e.prompt_id for e in waiting if e.parent_id)]))
    calls, silent = await calls_by_prompt(client, [known[p] for p in involved], timeout)
    return PendingList(rows=assemble(waiting, tops, calls), unanswered=sorted(silent), total=total,
                       next_cursor=encode_cursor(next_token))
