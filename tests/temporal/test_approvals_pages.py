"""The approvals list a page at a time (issue #28: at 10,000 waiting prompts the list must answer in 2 s): the
client (`AgentClient.pending(limit=, cursor=)`), `GET /approvals?limit=&cursor=` (with `X-Total-Count` and a
`Link: rel="next"` header) and `dagent pending --limit/--cursor` each cover every waiting prompt exactly once
across their pages, say how many wait in all, and refuse a cursor they did not give in one line. Real dev
server, worker, uvicorn and `dagent` process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.api.schemas import PendingApprovalItem
from durable_agent.client import AgentClient, PendingList
from tests.support.api import ApiStack, api_stack

T = TypeVar("T")
PROMPTS = 5


async def _eventually(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], seconds: float = 20.0) -> T:
    """Visibility is eventually consistent: read until `ok` (the last read, failing, once time is up)."""
    deadline = time.monotonic() + seconds
    while True:
        value = await read()
        if ok(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.2)


async def _waiting(stack: ApiStack, user: str) -> list[str]:
    prompts = [await stack.agent.start(f"pay bob {200 + i}", user_id=user) for i in range(PROMPTS)]
    for prompt in prompts:
        await prompt.wait_until("waiting_for_approval")
    every = await _eventually(lambda: stack.agent.pending(user_id=user), lambda f: len(f.rows) == PROMPTS)
    assert len(every.rows) == PROMPTS
    return sorted(p.id for p in prompts)


async def _client_pages(agent: AgentClient, user: str, limit: int) -> list[PendingList]:
    pages = [await agent.pending(user_id=user, limit=limit)]
    while pages[-1].next_cursor is not None:
        pages.append(await agent.pending(user_id=user, limit=limit, cursor=pages[-1].next_cursor))
    return pages


@pytest.fixture
def user() -> str:
    return f"pages-{uuid.uuid4().hex[:8]}"


async def test_client_api_and_cli_pages_cover_every_waiting_prompt_once(dev_env: WorkflowEnvironment,
                                                                         user: str) -> None:
    async with api_stack(dev_env) as stack:
        ids = await _waiting(stack, user)

        # the client
        pages = await _client_pages(stack.agent, user, limit=2)
        assert [len(p.rows) for p in pages] == [2, 2, 1]
        assert {p.total for p in pages} == {PROMPTS}
        assert sorted(row.prompt_id for p in pages for row in p.rows) == ids
        with pytest.raises(ValueError, match="is not one this list gave"):
            await stack.agent.pending(user_id=user, limit=2, cursor="not-a-cursor")
        with pytest.raises(ValueError, match="limit must be between 1 and 1000"):
            await stack.agent.pending(user_id=user, limit=0)

        # the API (an admin sees every prompt of this worker's queue)
        async with stack.http("root") as http:
            whole = await http.get("/approvals", params={"limit": 1000})
            assert whole.status_code == 200 and whole.headers["X-Total-Count"] == str(PROMPTS)
            assert "Link" not in whole.headers
            expected = {item["prompt_id"]: item for item in whole.json()}
            assert sorted(expected) == ids
            seen: list[dict[str, object]] = []
            url: str | None = "/approvals?limit=2"
            while url is not None:
                reply = await http.get(url)
                assert reply.status_code == 200, reply.text
                assert reply.headers["X-Total-Count"] == str(PROMPTS)
                seen += reply.json()
                link = re.fullmatch(r'<(.+)>; rel="next"', reply.headers.get("Link", ""))
                url = link[1] if link else None
            assert sorted(str(item["prompt_id"]) for item in seen) == ids
            for item in seen:  # the same items as one long page, each a valid PendingApprovalItem
                assert item == expected[str(item["prompt_id"])]
                PendingApprovalItem.model_validate(item)
            assert seen[0]["input"] == {"to": "bob", "amount": int(str(seen[0]["reason"]).split("$")[1].split()[0])}
            bad = await http.get("/approvals", params={"limit": 2, "cursor": "bm90LWEtdG9rZW4"})
            assert bad.status_code == 422 and "is not one this list gave" in bad.json()["detail"]

        # the CLI: the first page, and on stderr how many wait and the command for the next page
        settings = stack.agent.settings
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": settings.task_queue,
               "DAGENT_PAYLOAD_DIR": settings.payload_dir, "DAGENT_LOG_LEVEL": "WARNING"}
        env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
        listed: list[str] = []
        args = ["pending", "--user", user, "--json", "--limit", "2"]
        for _ in range(PROMPTS):
            done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "durable_agent.cli", *args],
                                           env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            listed += [row["prompt_id"] for row in json.loads(done.stdout)]
            following = re.search(r"Next page: dagent (pending --limit 2 --cursor \S+)", done.stderr)
            if following is None:
                assert done.stderr == ""
                break
            assert f"{PROMPTS} prompts wait in all" in done.stderr
            args = [*following[1].split(), "--user", user, "--json"]
        assert sorted(listed) == ids
        for prompt_id in ids:
            await stack.agent.prompt(prompt_id).workflow.terminate(reason="test over")
