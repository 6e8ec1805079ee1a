"""The web API's cost: tool result -> SSE event at the client, and per-request overhead over the client.

`.venv/bin/python -m bench.api_events [--prompts 100 --requests 200]` starts its own dev server, an
in-process worker and `dagent api` on a real uvicorn socket, then measures in one run:

1. Events: each prompt calls one tool that returns its wall-clock time; the time from that moment to the
   `output_updated` event carrying the result at an HTTP client of `GET /prompts/{id}/events` (SSE), next to
   the same for a direct `PromptHandle.live()` subscriber on the same prompt (the baseline). p50 / p99.
2. Overhead: `GET /prompts/{id}` over HTTP (authentication, query, JSON) against `PromptHandle.get()`
   (the same query, direct), alternated; medians and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

import httpx
from pydantic import BaseModel

from bench.scratch import scripted_agent
from durable_agent.agent.context import ToolContext
from durable_agent.agent.logging import configure_logging
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from durable_agent.client import PromptHandle

KEY = "bench-key-0123456789abcdef"


class Stamp(BaseModel):
    n: int


@tool("bench.stamp")
async def stamp(args: Stamp, ctx: ToolContext) -> float:
    """Return the moment the result was produced."""
    return time.time()


def _script(request: ModelRequest) -> ModelResponse:
    if any(isinstance(m, ToolResultMessage) for m in request.messages):
        return text("done")
    return tool_calls(("bench.stamp", {"n": 1}))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _sse_latency(http: httpx.AsyncClient, prompt_id: str) -> float:
    async with http.stream("GET", f"/prompts/{prompt_id}/events") as response:
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "output_updated":
                received = time.time()
                data = json.loads(line.split(":", 1)[1])
                result = (data.get("output") or {}).get("result") or {}
                if result.get("type") == "success":
                    return (received - float(result["output"])) * 1000
    raise RuntimeError(f"no tool result event for {prompt_id}")


async def _direct_latency(handle: PromptHandle) -> float:
    async for _, item in handle.live():
        entry = getattr(item, "output", None)
        if getattr(item, "kind", "") == "output_updated" and isinstance(entry, ToolOutput) \
                and isinstance(entry.result, ToolSuccess):
            return (time.time() - float(entry.result.output)) * 1000  # type: ignore[arg-type]
    raise RuntimeError(f"no tool result event for {handle.id}")


async def measure(prompts: int, requests: int, concurrency: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"sse": [], "direct": [], "http_get": [], "client_get": []}
    config = ApiConfig(api_keys=[ApiKey(principal="bench", key=KEY, roles=["admin"])])
    async with scripted_agent("api-bench", stamp, ScriptedModel(_script)) as agent, \
            serve_in_background(create_app(agent, config)) as url, \
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as http:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                handle = await agent.start("go", user_id="bench", max_rounds=3)
                sse, direct = await asyncio.gather(_sse_latency(http, handle.id), _direct_latency(handle))
                results["sse"].append(sse)
                results["direct"].append(direct)
                await handle.result()

        await asyncio.gather(*(one() for _ in range(prompts)))
        handle = await agent.start("go", user_id="bench", max_rounds=3)
        await handle.result()
        for _ in range(requests):
            started = time.perf_counter()
            response = await http.get(f"/prompts/{handle.id}")
            response.raise_for_status()
            results["http_get"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await handle.get()
            results["client_get"].append((time.perf_counter() - started) * 1000)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    configure_logging("WARNING")
    r = asyncio.run(measure(args.prompts, args.requests, args.concurrency))
    p50 = statistics.median
    print(f"tool result -> event, {len(r['sse'])} prompts (concurrency {args.concurrency}):")
    print(f"  SSE via the API      p50 {p50(r['sse']):7.1f} ms   p99 {_percentile(r['sse'], 0.99):7.1f} ms")
    print(f"  PromptHandle.live()  p50 {p50(r['direct']):7.1f} ms   p99 {_percentile(r['direct'], 0.99):7.1f} ms"
          "   (baseline)")
    print(f"  ratio SSE / direct   p50 {p50(r['sse']) / p50(r['direct']):.2f}x")
    print(f"per request, {len(r['http_get'])} each:")
    for label, key, note in (("GET /prompts/{id}  ", "http_get", ""), ("PromptHandle.get() ", "client_get",
                                                                       "   (baseline)")):
        print(f"  {label} median {p50(r[key]):6.2f} ms   p99 {_percentile(r[key], 0.99):6.2f} ms{note}")
    print(f"  API overhead ratio   {p50(r['http_get']) / p50(r['client_get']):.2f}x "
          f"(+{p50(r['http_get']) - p50(r['client_get']):.2f} ms)")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
