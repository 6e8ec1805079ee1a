"""The approvals list with many prompts waiting: how long each way of listing takes and how many rows it shows.

* this project: `AgentClient.pending()` in this process (visibility: one list query, the memos), the CLI
  (`dagent pending --json`, a new process: cold start included) and the HTTP API (`GET /approvals`, served by
  uvicorn in this process, as an admin, so every row is seen);
* the same list built the way it was before memos (and the way the hand-rolled baseline has to): the waiting
  prompts from visibility, then one query per prompt (each a workflow task on its worker; an evicted prompt
  is replayed to answer), 50 at a time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from temporalio.client import Client

from bench.footprint import dagent_command, run_command
from bench.measure import bounded_gather
from bench.sides import BaselineSide, ProductSide
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.client import AgentClient

ADMIN_KEY = "bench-admin-key-0123456789abcdef"
QUERY_CONCURRENCY = 50


async def timed(work: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    """(ms, rows) of one listing."""
    t0 = time.perf_counter()
    rows = await work()
    return (time.perf_counter() - t0) * 1000, rows


async def _client_list(agent: AgentClient) -> int:
    return len((await agent.pending(user_id="bench")).rows)


async def _queries_list(agent: AgentClient) -> int:
    """The list before memos: every waiting prompt asked by a query."""
    waiting = await agent.waiting_prompts(user_id="bench")
    answers = await bounded_gather([lambda p=w.prompt_id: agent.prompt(p).pending_approvals() for w in waiting],
                                   QUERY_CONCURRENCY)
    return sum(len(a) for a in answers)


async def _baseline_list(client: Client, task_queue: str) -> int:
    """The hand-rolled equivalent: waiting workflows from visibility, then each one's state by a query."""
    query = (f"TaskQueue = '{task_queue}' AND PromptState = 'waiting_for_approval' "
             f"AND ExecutionStatus = 'Running'")
    ids = [e.id async for e in client.list_workflows(query, page_size=1000)]
    states = await bounded_gather([lambda i=i: client.get_workflow_handle(i).query("get_state") for i in ids],
                                  QUERY_CONCURRENCY)
    return len(states)


async def product_lists(side: ProductSide, repeats: int, *, with_queries: bool) -> dict[str, Any]:
    """Each way of listing the side's waiting calls, `repeats` times (medians and rows seen)."""
    agent = side.agent
    out: dict[str, Any] = {}

    async def record(name: str, work: Callable[[], Awaitable[int]]) -> None:
        samples = [await timed(work) for _ in range(repeats)]
        out[name] = {"ms": [ms for ms, _ in samples], "rows": [rows for _, rows in samples]}

    await record("client", lambda: _client_list(agent))
    env = dict(side.worker_env())

    async def cli() -> int:
        args = [*dagent_command(), "pending", "--json", "--user", "bench", "--address", side.address]
        return len(json.loads(await asyncio.to_thread(run_command, args, env)))

    await record("cli", cli)
    config = ApiConfig(api_keys=[ApiKey(principal="bench-admin", roles=["admin"], key=ADMIN_KEY)])
    async with serve_in_background(create_app(agent=agent, config=config)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=120,
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            async def api() -> int:
                reply = await http.get("/approvals")
                reply.raise_for_status()
                return len(reply.json())
            await record("api", api)
    if with_queries:
        await record("queries", lambda: _queries_list(agent))
    return out


async def baseline_lists(side: BaselineSide, repeats: int) -> dict[str, Any]:
    samples = [await timed(lambda: _baseline_list(side.client, side.task_queue)) for _ in range(repeats)]
    return {"queries": {"ms": [ms for ms, _ in samples], "rows": [rows for _, rows in samples]}}
