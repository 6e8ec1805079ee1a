"""Per-round cost of the shared S3 blob store against the local directory, measured in one run.

    .venv/bin/python -m bench.blobstore            # ~2-4 min on 2 cores
    .venv/bin/python -m bench.blobstore --repeats 5 --rounds 1,6

Starts a headless dev server and an S3 API server (moto in server mode, its own process, on loopback) and
runs prompts whose every round calls a tool returning 1 MB, once with `DAGENT_STORE` empty (the local
directory) and once with `DAGENT_STORE=s3://…` (the SDK's S3 driver through aioboto3), sides interleaved.
Per-round cost = (median time of an R2-round prompt - median time of an R1-round prompt) / (R2 - R1), so
start-up and the final answer cancel out. Prints both, the ratio S3 / directory, and the blob bytes written.
Workers run in this process (both sides alike); the model is scripted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import boto3
from pydantic import BaseModel

from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.context import ToolContext
from durable_agent.agent.logging import configure_logging
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker

OUTPUT_BYTES = 1_000_000
BUCKET = "bench-blobs"


class BigInput(BaseModel):
    round: int


@tool("bench.megabyte")
async def megabyte(args: BigInput, ctx: ToolContext) -> str:
    """Return 1 MB of fresh text."""
    return os.urandom(OUTPUT_BYTES // 2).hex()


def _script(request: ModelRequest) -> ModelResponse:
    wanted, done = 1, 0
    for message in request.messages:
        if isinstance(message, UserMessage):
            wanted, done = int(message.text.split("=")[1]), 0
        elif isinstance(message, ToolResultMessage):
            done += 1
    if done < wanted:
        return tool_calls(("bench.megabyte", {"round": done + 1}))
    return text(f"{done} rounds done")


PLUGIN = Plugin("bench-blobs", tools=[megabyte])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    moto_server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(moto_server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return proc, endpoint


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _bucket_bytes(endpoint: str) -> int:
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                      region_name="us-east-1")
    return sum(o["Size"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
               for o in page.get("Contents", []))


async def _side(settings: Settings) -> tuple[AgentClient, AgentRuntime]:
    model = ScriptedModel(_script)
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": model, "high": model})
    runtime.max_tool_output_bytes = 2 * OUTPUT_BYTES
    return await AgentClient.connect(settings), runtime


async def _time_prompt(client: AgentClient, rounds: int) -> float:
    started = time.perf_counter()
    prompt = await client.run(f"rounds={rounds}")
    elapsed = time.perf_counter() - started
    if prompt.state != "completed" or prompt.rounds != rounds + 1:
        raise RuntimeError(f"bench prompt ended {prompt.state} after {prompt.rounds} rounds: {prompt.error}")
    return elapsed


async def main(repeats: int, low: int, high: int) -> None:
    configure_logging("WARNING")
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    moto, endpoint = _start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="dagent-bench-blobs-"))
    try:
        async with DevServer(log_file=tmp / "server.log") as server:
            base = Settings(temporal_address=server.address, plugins=())
            sides = {
                "directory": base.model_copy(update={"task_queue": f"bench-dir-{uuid.uuid4().hex[:6]}",
                                                     "payload_dir": str(tmp / "payloads"),
                                                     "file_dir": str(tmp / "files")}),
                "s3": base.model_copy(update={"task_queue": f"bench-s3-{uuid.uuid4().hex[:6]}",
                                              "store": f"s3://{BUCKET}", "s3_endpoint_url": endpoint}),
            }
            clients = {name: await _side(settings) for name, settings in sides.items()}
            times: dict[str, dict[int, list[float]]] = {name: {low: [], high: []} for name in sides}
            workers = [create_worker(client.client, runtime, task_queue=sides[name].task_queue)
                       for name, (client, runtime) in clients.items()]
            for worker in workers:
                await worker.__aenter__()
            try:
                for client, _ in clients.values():  # warm-up
                    await _time_prompt(client, 1)
                for _ in range(repeats):
                    for rounds in (low, high):
                        for name, (client, _) in clients.items():
                            times[name][rounds].append(await _time_prompt(client, rounds))
            finally:
                for worker in workers:
                    await worker.__aexit__(None, None, None)
        stored = {"directory": _dir_bytes(tmp / "payloads"), "s3": _bucket_bytes(endpoint)}
    finally:
        moto.terminate()
        moto.wait(10)
    per_round = {name: (statistics.median(t[high]) - statistics.median(t[low])) / (high - low)
                 for name, t in times.items()}
    prompts = (1 + 2 * repeats)
    print(f"1 MB tool output per round; {repeats} prompts of {low} and of {high} rounds per side, interleaved")
    print(f"{'store':<10} {'median ' + str(low) + ' rounds':>16} {'median ' + str(high) + ' rounds':>16} "
          f"{'per round':>11} {'blob MB written':>16}")
    for name in sides:
        low_s, high_s = statistics.median(times[name][low]), statistics.median(times[name][high])
        print(f"{name:<10} {low_s:>15.3f}s {high_s:>15.3f}s {per_round[name] * 1000:>9.1f}ms "
              f"{stored[name] / 1e6:>15.1f} ({prompts} prompts)")
    print(f"S3 / directory per-round cost: {per_round['s3'] / per_round['directory']:.2f}x "
          f"(+{(per_round['s3'] - per_round['directory']) * 1000:.1f} ms per 1 MB round)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", default="1,5", help="the two round counts, e.g. 1,5")
    args = parser.parse_args()
    low, high = (int(r) for r in args.rounds.split(","))
    asyncio.run(main(args.repeats, low, high))
    sys.stdout.flush()
    os._exit(0)  # the SDK can crash in interpreter teardown (sdk-python#300)
