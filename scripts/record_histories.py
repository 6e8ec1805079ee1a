"""Record workflow histories for the replay tests: `python scripts/record_histories.py`.

Re-record when a workflow change is *meant* to be incompatible and has been guarded with
`workflow.patched` (keep the old files too: they prove old histories still replay).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio.client import WorkflowHandle  # noqa: E402

from agent.client import AgentClient, PromptHandle  # noqa: E402
from agent.config import Settings  # noqa: E402
from tests import scenarios  # noqa: E402
from workers.devserver import DevServer  # noqa: E402
from workers.worker import build_runtime, connect, create_worker  # noqa: E402

OUT = ROOT / "tests" / "histories"


async def _save(name: str, handle: WorkflowHandle) -> None:  # type: ignore[type-arg]
    history = await handle.fetch_history()
    (OUT / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}: {len(history.events)} events")


async def _first_pending(handle: PromptHandle) -> str:
    prompt = await handle.wait_until("waiting_for_approval")
    return next(p.tool_call_id for p in await handle.pending_approvals()) if prompt.state != "completed" else ""


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    async with DevServer() as server:
        settings = Settings(temporal_address=server.address, task_queue="record-histories", file_dir="/tmp/dagent-rec")
        client = await connect(settings)
        runtime = build_runtime(settings, plugins=[scenarios.plugin],
                                providers={"normal": scenarios.model, "high": scenarios.model})
        agent = AgentClient(client, settings)
        async with create_worker(client, runtime, task_queue=settings.task_queue):
            done = await agent.start("completed", prompt_id="hist-completed", user_id="u1", conversation_id="c1")
            await done.result()
            await _save("prompt_completed", done.workflow)

            waiting = await agent.start("approval", prompt_id="hist-waiting")
            await _first_pending(waiting)
            await _save("prompt_waiting_for_approval", waiting.workflow)
            await waiting.approve(await _first_pending(waiting), by="alice", input={"amount": 450})
            await waiting.result()
            await _save("prompt_approved_with_correction", waiting.workflow)

            rejected = await agent.start("approval", prompt_id="hist-rejected")
            call = await _first_pending(rejected)
            await rejected.approve("call-unknown")  # ignored and audited
            await rejected.reject(call, by="bob", reason="no")
            await rejected.result()
            await _save("prompt_rejected", rejected.workflow)

            batch = await agent.start("batch", prompt_id="hist-batch")
            await batch.approve(await _first_pending(batch), wait=True)
            await batch.result()
            await _save("prompt_deferred_batch", batch.workflow)

            invalid = await agent.start("invalid", prompt_id="hist-invalid")
            await invalid.result()
            await _save("prompt_invalid_calls", invalid.workflow)

            failed = await agent.start("fail", prompt_id="hist-failed")
            await failed.result()
            await _save("prompt_failed", failed.workflow)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
