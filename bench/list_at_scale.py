"""The approvals list at N waiting prompts (default 10,000), measured where its cost is: visibility.

    .venv/bin/python -m bench.list_at_scale                  # N = 10,000
    .venv/bin/python -m bench.list_at_scale --prompts 2000 --repeats 5

`AgentClient.pending` reads only the visibility store: each waiting prompt's `PromptState`, `UserId` and its
memo's waiting calls (workflows/pending_memo.py). The workflow is never asked. So N waiting prompts can be
laid out without a worker: each `PromptWorkflow` is started on a task queue no worker polls, with the
search attributes and the memo a prompt waiting for one call has (the real encoding: the project's client
and data converter, `pending_memo()`), and is never run. Filling 10,000 real waiting prompts takes the
worker about an hour on a 2-core machine (`bench.run --sections waiting --waiting N` does that, and adds
worker RSS and resume latency). Then each way of listing is timed (median of `--repeats`):
`AgentClient.pending` in this process, `dagent pending --json` (a new process: its cold start included)
and `GET /approvals` (uvicorn in this process, as an admin). Each is timed twice: its first page (the calls of 100
waiting prompts: what `dagent pending`, `GET /approvals` and the inbox show first, with the total) and the
whole list (`--limit 0`; the API page by page).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from bench.approvals_list import ADMIN_KEY
from bench.footprint import dagent_command, run_command
from bench.measure import bounded_gather
from bench.scratch import remove_scratch, scratch_server
from bench.sides import product_settings
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.client import AgentClient
from durable_agent.client.pending import PAGE_SIZE
from durable_agent.workers.worker import connect
from durable_agent.workflows.names import PROMPT_STATE, PROMPT_WORKFLOW, USER_ID
from durable_agent.workflows.pending_memo import PENDING_MEMO_KEY, pending_memo
from durable_agent.workflows.protocol import PendingApproval, PromptRequest
from durable_agent.workflows.versioning.versions import CURRENT_VERSION

USER = "bench"
PAGE = 100  # what `dagent pending`, `GET /approvals` and the inbox show first
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"seq": {"type": "integer"}, "size": {"type": "integer"},
                                                           "approve": {"type": "boolean"}},
                          "required": ["seq", "size", "approve"]}


async def lay_out(agent: AgentClient, count: int, task_queue: str) -> None:
    """`count` prompts as visibility shows a prompt waiting for one call (never run: nobody polls the queue)."""
    now = datetime.now(UTC)

    async def start(i: int) -> None:
        prompt_id = f"scale-{uuid.uuid4().hex[:16]}"
        call = PendingApproval(prompt_id=prompt_id, user_id=USER, tool_call_id="call_r1_0", tool="bench.echo",
                               input={"seq": 1, "size": 16, "approve": True}, reason="Needs approval.",
                               requested_at=now, input_schema=SCHEMA)
        await agent.client.start_workflow(
            PROMPT_WORKFLOW, PromptRequest(prompt_id=prompt_id, user_id=USER, input=f"bench {i}",
                                           workflow_version=CURRENT_VERSION),
            id=prompt_id, task_queue=task_queue,
            memo={"summary": f"bench {i}", PENDING_MEMO_KEY: pending_memo([call])},
            search_attributes=TypedSearchAttributes([SearchAttributePair(PROMPT_STATE, "waiting_for_approval"),
                                                     SearchAttributePair(USER_ID, USER)]))

    await bounded_gather([lambda i=i: start(i) for i in range(count)], 100)
    query = f"PromptState = 'waiting_for_approval' AND ExecutionStatus = 'Running' AND TaskQueue = '{task_queue}'"
    while (await agent.client.count_workflows(query)).count < count:  # noqa: ASYNC110 (a remote count, no event)
        await asyncio.sleep(0.5)


async def timed(work: Any, repeats: int) -> dict[str, Any]:
    samples, rows = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows.append(await work())
        samples.append((time.perf_counter() - t0) * 1000)
    return {"ms": samples, "median_ms": statistics.median(samples), "rows": rows}


async def measure(count: int, repeats: int, profile: bool = False) -> dict[str, Any]:
    server, workdir = scratch_server("scale")
    await server.start_async()
    try:
        settings = product_settings(server.address, workdir, "unused")
        agent = AgentClient(await connect(settings), settings)
        t0 = time.perf_counter()
        task_queue = f"unpolled-{uuid.uuid4().hex[:6]}"
        settings = settings.model_copy(update={"task_queue": task_queue})  # the list is of one task queue's prompts
        agent = AgentClient(agent.client, settings)
        await lay_out(agent, count, task_queue)
        out: dict[str, Any] = {"prompts": count, "lay_out_s": time.perf_counter() - t0}
        out["client_page"] = await timed(lambda: _rows(agent, PAGE), repeats)
        out["client"] = await timed(lambda: _rows(agent), repeats)
        if profile:
            import cProfile
            import pstats
            profiler = cProfile.Profile()
            profiler.enable()
            await _rows(agent)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        env = dict(os.environ) | {"TEMPORAL_ADDRESS": server.address, "DAGENT_PAYLOAD_DIR": settings.payload_dir,
                                  "DAGENT_TASK_QUEUE": task_queue}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled once, not on every run
        run_command([*dagent_command(), "--help"], env)  # writes the bytecode of a fresh checkout

        async def cli(*limit: str) -> int:
            args = [*dagent_command(), "pending", "--json", "--user", USER, *limit]
            return len(json.loads(await asyncio.to_thread(run_command, args, env)))

        out["cli_page"] = await timed(cli, repeats)
        out["cli"] = await timed(lambda: cli("--limit", "0"), repeats)
        # The bench's prompts have no worker: a context read (a query) is never answered, so the API would wait
        # `pending_query_seconds` (5 s) for it on every page. Bounded at 0.2 s here; with workers running the
        # contexts are read once per call and kept.
        config = ApiConfig(api_keys=[ApiKey(principal="bench-admin", roles=["admin"], key=ADMIN_KEY)],
                           pending_query_seconds=0.2)
        async with serve_in_background(create_app(agent=agent, config=config)) as base_url, httpx.AsyncClient(
                base_url=base_url, timeout=300, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            async def api_page() -> int:
                reply = await http.get("/approvals")
                reply.raise_for_status()
                assert reply.headers["X-Total-Count"] == str(count), reply.headers
                return len(reply.json())

            async def api_all() -> int:
                rows, url = 0, f"/approvals?limit={PAGE_SIZE}"
                while url:
                    reply = await http.get(url)
                    reply.raise_for_status()
                    rows += len(reply.json())
                    url = reply.links.get("next", {}).get("url", "")
                return rows

            out["api_page"] = await timed(api_page, repeats)
            out["api"] = await timed(api_all, repeats)
        return out
    finally:
        await server.stop_async()
        remove_scratch("scale", workdir)


async def _rows(agent: AgentClient, limit: int | None = None) -> int:
    found = await agent.pending(user_id=USER, limit=limit)
    return len(found.rows)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.list_at_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="JSON results file")
    parser.add_argument("--profile", action="store_true", help="also print where one client list spends its time")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    out = asyncio.run(measure(args.prompts, args.repeats, args.profile))
    out["loadavg_before_after"] = [load, os.getloadavg()[0]]
    print(f"{args.prompts} waiting prompts laid out in {out['lay_out_s']:.0f} s")
    ways = (("client_page", "AgentClient.pending(limit=100)"), ("client", "AgentClient.pending (all)"),
            ("cli_page", "dagent pending --json"), ("cli", "dagent pending --json --limit 0"),
            ("api_page", "GET /approvals"), ("api", "GET /approvals (every page of 1000)"))
    for name, label in ways:
        expected = min(PAGE, args.prompts) if name.endswith("_page") else args.prompts
        ok = all(rows == expected for rows in out[name]["rows"])
        samples = ", ".join(f"{v:.0f}" for v in out[name]["ms"])
        print(f"{label:36} median {out[name]['median_ms']:8.0f} ms  samples {samples}  rows "
              f"{out[name]['rows'][-1]}{'' if ok else ' (MISSING ROWS)'}")
    before, after = out["loadavg_before_after"]
    print(f"load average (1 min) before/after: {before:.1f}/{after:.1f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
