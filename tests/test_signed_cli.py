"""`dagent approve` / `reject` where decisions must be signed (workers with DAGENT_DECISION_PUBLIC_KEY): with
DAGENT_API_URL and the person's DAGENT_API_KEY they decide through the HTTP API (which signs for the person its
key names); without, the refusal is one line saying what to set. Real worker, API on a real socket, the CLI
as a subprocess, the session's dev server."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import threading

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.api import create_app
from durable_agent.api.server import serve_in_background
from tests.support import batch_desk
from tests.support.api import USERS, api_config, key_pair
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker


def _dagent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT_CMD, *args], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


async def test_dagent_approve_decides_through_the_api_when_decisions_are_signed(dev_env: WorkflowEnvironment) -> None:
    private_pem, public_pem = key_pair()
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model,
                            decision_key=public_pem) as client:
        async with serve_in_background(create_app(client, api_config(private_pem))) as url:
            handle = await client.start("batch: pay both invoices and email ACME", user_id="alice")
            for _ in range(400):
                if len(await handle.pending_approvals()) == 3:
                    break
                await asyncio.sleep(0.05)
            details = (await handle.workflow.query("__temporal_workflow_metadata",
                                                   result_type=WorkflowMetadata)).current_details
            base = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                    "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
            base.pop("DAGENT_API_URL", None)
            base.pop("DAGENT_API_KEY", None)
            as_ann = {**base, "DAGENT_API_URL": url, "DAGENT_API_KEY": USERS["ann"][0]}

            def cli() -> dict[str, subprocess.CompletedProcess[str]]:
                return {
                    "unsigned": _dagent(base, "approve", handle.id, "call_r1_0", "--by", "ann"),
                    "half": _dagent({**base, "DAGENT_API_URL": url}, "approve", handle.id, "call_r1_0"),
                    "wrong key": _dagent({**as_ann, "DAGENT_API_KEY": "wrong-key-000000000000"},
                                         "approve", handle.id, "call_r1_0"),
                    "approve": _dagent(as_ann, "approve", handle.id, "call_r1_0", "--input", '{"amount": 450}'),
                    "reject": _dagent(as_ann, "reject", handle.id, "call_r1_1", "--reason", "not this month"),
                    "all": _dagent(as_ann, "approve", handle.id, "--all"),
                }

            ran = await asyncio.to_thread(cli)
            prompt = await handle.result()

    assert f"decide with `dagent approve {handle.id} call_r1_0` — or every call at once" in details
    unsigned = ran["unsigned"]
    assert unsigned.returncode == 1 and len(unsigned.stderr.splitlines()) == 1, unsigned
    assert "a signed decision token is required" in unsigned.stderr
    assert "set DAGENT_API_URL (the `dagent api` address) and DAGENT_API_KEY (your API key)" in unsigned.stderr
    half = ran["half"]
    assert half.returncode == 2 and half.stderr.strip() == (
        "error: DAGENT_API_KEY is not set: deciding through the API needs both DAGENT_API_URL and DAGENT_API_KEY")
    wrong = ran["wrong key"]
    assert wrong.returncode == 1 and wrong.stderr.strip().endswith("did not accept DAGENT_API_KEY"), wrong
    for name in ("approve", "reject", "all"):
        assert ran[name].returncode == 0, (name, ran[name])
    assert "approved by ann at" in ran["approve"].stdout and "(amount changed 480 → 450 by ann)" in \
        ran["approve"].stdout and "runs when the other 2 decisions are in" in ran["approve"].stdout
    assert "rejected by ann" in ran["reject"].stdout

    calls = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert prompt.state == "completed"
    assert [(c.decision.decision, c.decision.by) for c in calls] == [  # type: ignore[union-attr]
        ("approved", "ann"), ("rejected", "ann"), ("approved", "ann")]
    assert calls[0].input == {"to": "ACME Corp", "amount": 450}
    assert calls[1].decision.reason == "not this month"  # type: ignore[union-attr]
    assert not any(a.kind.startswith("ignored") for a in prompt.audit), prompt.audit  # nothing unsigned got in


async def test_terminal_questions_are_answered_through_the_api_when_decisions_are_signed(
        dev_env: WorkflowEnvironment) -> None:
    """`dagent chat` (the same questions as `run`) with DAGENT_API_URL/DAGENT_API_KEY: each answer is a signed
    decision taken by the key's person; without them, each answer is refused in one line and nothing is decided."""
    private_pem, public_pem = key_pair()
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model,
                            decision_key=public_pem) as client:
        async with serve_in_background(create_app(client, api_config(private_pem))) as url:
            base = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                    "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
            base.pop("DAGENT_API_URL", None)
            base.pop("DAGENT_API_KEY", None)
            as_ann = {**base, "DAGENT_API_URL": url, "DAGENT_API_KEY": USERS["ann"][0]}

            def chat(env: dict[str, str], answers: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run([*DAGENT_CMD, "chat", "--user", "alice"], env=env, capture_output=True,
                                      text=True, timeout=120, input=f"batch: pay and email\n{answers}\n")

            signed = await asyncio.to_thread(chat, as_ann, "y\nn\ny\n")
            unsigned = await asyncio.to_thread(_refused_three_times, base)
            conversations = [re.search(r"^conversation (conv-\w+)", said, re.M).group(1)  # type: ignore[union-attr]
                             for said in (signed.stdout, unsigned)]
            records = []
            for conversation_id in conversations:  # straight from each conversation (no visibility lag)
                conversation = await client.conversation(conversation_id).get()
                ids = [*conversation.prompt_ids, *filter(None, [conversation.running_prompt_id])]
                records += [await client.prompt(p).get() for p in dict.fromkeys(ids)]

    assert signed.returncode == 0, signed.stderr
    assert signed.stdout.count("your answer was not applied") == 0, signed.stdout
    refusals = re.findall(r"your answer was not applied: decision on 'call_r1_\d' refused: a signed decision token "
                          r"is required .* set DAGENT_API_URL .* and DAGENT_API_KEY", unsigned)
    assert len(refusals) == 3, unsigned
    done = next(r for r in records if r.state == "completed")
    assert [(c.decision.decision, c.decision.by) for c in done.output if isinstance(c, ToolOutput)] == [  # type: ignore[union-attr]
        ("approved", "ann"), ("rejected", "ann"), ("approved", "ann")]
    still = [r for r in records if r.state == "waiting_for_approval"]
    assert len(still) == 1 and all(c.decision is None for c in still[0].output if isinstance(c, ToolOutput))


def _refused_three_times(env: dict[str, str]) -> str:
    """`dagent chat` answering yes three times without the API: what it printed once each answer was refused
    (the prompt then waits for someone who may decide, so the chat keeps following it: it is stopped here)."""
    proc = subprocess.Popen([*DAGENT_CMD, "chat", "--user", "alice"], env={**env, "PYTHONUNBUFFERED": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("batch: pay and email\ny\ny\ny\n")
    proc.stdin.flush()
    seen: list[str] = []
    timer = threading.Timer(90, proc.kill)  # a guard: the refusals come in seconds
    timer.start()
    try:
        for line in proc.stdout:
            seen.append(line)
            if sum("your answer was not applied" in said for said in seen) == 3:
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait(timeout=15)
    return "".join(seen)
