"""The CLI's output contract, for every command: a user error is one line on stderr with a non-zero exit
code; `--json` (show, ls, pending, stuck) is exactly one JSON document on stdout, everything else on
stderr; `dagent approve` exits non-zero whenever the call did not succeed (refused, or the tool failed).
The JSON and approve contracts run against a dev server and a worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, ToolFailed, tool
from tests.support.workers import agent_worker

DAGENT = [sys.executable, "-m", "durable_agent.cli"]
OFFLINE = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1", "DAGENT_LOG_LEVEL": "WARNING"}  # nothing listens

USER_ERRORS = {
    "run without text": ["run"],
    "run with an over-long input": ["run", "x" * 100_001],
    "run with an unknown tier": ["run", "hi", "--model", "huge"],
    "show without id": ["show"],
    "show, server unreachable": ["show", "prompt-1", "--json"],
    "watch with a bad offset": ["watch", "prompt-1", "--from", "soon"],
    "approve with --input not JSON": ["approve", "p", "c", "--input", "{amount: 90}"],
    "approve with --input not an object": ["approve", "p", "c", "--input", "[1]"],
    "reject without call id": ["reject", "prompt-1"],
    "pending, server unreachable": ["pending"],
    "stuck, server unreachable": ["stuck"],
    "stuck --json, server unreachable": ["stuck", "--json"],
    "pending --json, server unreachable": ["pending", "--json"],
    "ls with an unknown state": ["ls", "--state", "sleepy"],
    "ls --json, server unreachable": ["ls", "--json"],
    "ls with a bad limit": ["ls", "--limit", "many"],
    "store without a subcommand's name": ["store", "nosuch"],
    "store sweep, server unreachable": ["store", "sweep"],
    "store sweep with a bad grace": ["store", "sweep", "--grace-minutes", "soon"],
    "codec-server without keys": ["codec-server"],
    "codec-server with a bad port": ["codec-server", "--port", "x"],
    "api with a bad port": ["api", "--port", "x"],
    "api with a config file that is not there": ["api", "--config", "/nonexistent/dagent-api.toml"],
    "approve with a call id and --all": ["approve", "p", "c", "--all"],
    "approve --all with --input": ["approve", "p", "--all", "--input", "{}"],
    "approve, server unreachable": ["approve", "p", "c"],
    "reject without id": ["reject"],
    "watch without id": ["watch"],
    "cancel without id": ["cancel"],
    "chat with an unknown option": ["chat", "--nope"],
    "worker with a bad model spec": ["worker", "--model-normal", "no-such-provider:x"],
    "server with a bad port": ["server", "--port", "http"],
    "demo with an unknown option": ["demo", "--fast"],
    "an unknown command": ["nosuch"],
}


ENV_ERRORS = {  # a bad configuration in the environment: still one line
    "store check with an unknown store": (["store", "check"], {"DAGENT_STORE": "nosuch://bucket"}),
    "store check, store not reachable": (["store", "check"], {"DAGENT_STORE": "s3://bucket",
                                                              "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
                                                              "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}),
    "show with a bad DAGENT_ variable": (["show", "p"], {"DAGENT_PAYLOAD_THRESHOLD": "big"}),
}


def one_line_error(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode != 0, done
    assert done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error: ", "refused: ")), done.stderr


@pytest.fixture(scope="module")
def error_runs() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every error case run once, a few at a time (each is a fresh interpreter: ~2 s, mostly imports)."""
    cases = {name: (args, OFFLINE) for name, args in USER_ERRORS.items()}
    cases |= {name: (args, {**OFFLINE, **env}) for name, (args, env) in ENV_ERRORS.items()}

    def run(case: tuple[list[str], dict[str, str]]) -> subprocess.CompletedProcess[str]:
        args, env = case
        return subprocess.run([*DAGENT, *args], env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(cases, pool.map(run, cases.values()), strict=True))


@pytest.mark.parametrize("name", USER_ERRORS)
def test_a_user_error_is_one_line_on_stderr_with_a_non_zero_exit(
        name: str, error_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    one_line_error(error_runs[name])


@pytest.mark.parametrize("name", ENV_ERRORS)
def test_a_bad_environment_is_one_line_on_stderr_too(
        name: str, error_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    one_line_error(error_runs[name])


# --- against a server: --json documents and approve's exit code -----------------------------------------


class Transfer(BaseModel):
    to: str
    amount: int


@tool("bank.transfer", approval=Approval(reason="Moving money needs approval."))
async def transfer(args: Transfer, ctx: ToolContext) -> str:
    """Transfer money; refuses amounts over 100 after the approval (the call fails)."""
    if args.amount > 100:
        raise ToolFailed(f"limit exceeded: {args.amount}")
    return f"sent {args.amount} to {args.to}"


bank = Plugin("bank", tools=[transfer])
def _bank_script(request: ModelRequest) -> ModelResponse:
    """`send 5` asks for one transfer of 5; `send 7 8` for two in one batch."""
    amounts = next(m.text for m in request.messages if isinstance(m, UserMessage)).split()[1:]
    if request.round > 1:
        return text("ok")
    return tool_calls(*[("bank.transfer", {"to": "bob", "amount": int(a)}) for a in amounts])


bank_model = ScriptedModel(_bank_script)


def dagent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT, *args], env=env, capture_output=True, text=True, timeout=90,
                          stdin=subprocess.DEVNULL)


async def test_json_is_one_document_on_stdout_and_approve_exits_non_zero_unless_the_call_succeeded(
        dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[bank], model=bank_model) as client:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "DEBUG",
               "DAGENT_PAYLOAD_DIR": client.settings.payload_dir}
        ok, failing, batch = [await client.start(f"send {amount}", user_id="contract") for amount in (5, 500, "7 8")]
        for handle in (ok, failing, batch):
            await handle.wait_until("waiting_for_approval")
        call = "call_r1_0"
        for _ in range(100):  # visibility (ls, pending) lags the workflows a little
            listed = await asyncio.to_thread(dagent, env, "pending", "--json", "--user", "contract")
            if listed.returncode == 0 and len(json.loads(listed.stdout)) == 4:
                break
            await asyncio.sleep(0.2)
        documents = {}
        for args in (["show", ok.id, "--json"], ["ls", "--json", "--user", "contract"],
                     ["pending", "--json", "--user", "contract"], ["stuck", "--json"]):
            done = await asyncio.to_thread(dagent, env, *args)
            assert done.returncode == 0, done.stderr
            documents[args[0]] = json.loads(done.stdout)  # the whole of stdout: exactly one document
        refused_correction = await asyncio.to_thread(dagent, env, "approve", ok.id, call, "--input", '{"amount": "x"}')
        refused_id = await asyncio.to_thread(dagent, env, "approve", ok.id, "no-such-call")
        still_pending = await ok.get()
        approved = await asyncio.to_thread(dagent, env, "approve", ok.id, call, "--input", '{"amount": 9}')
        tool_failed = await asyncio.to_thread(dagent, env, "approve", failing.id, call)
        after_the_end = await asyncio.to_thread(dagent, env, "approve", failing.id, call)
        every = await asyncio.to_thread(dagent, env, "approve", batch.id, "--all")
        nothing_left = await asyncio.to_thread(dagent, env, "approve", batch.id, "--all")
    assert documents["show"]["id"] == ok.id and documents["show"]["state"] == "waiting_for_approval"
    assert sorted(row["id"] for row in documents["ls"]) == sorted([ok.id, failing.id, batch.id])
    assert sorted(row["prompt_id"] for row in documents["pending"]) == sorted([ok.id, failing.id, batch.id, batch.id])
    assert isinstance(documents["stuck"], list)
    for refused in (refused_correction, refused_id, after_the_end):
        one_line_error(refused)
    assert "amount" in refused_correction.stderr and still_pending.state == "waiting_for_approval"
    assert approved.returncode == 0 and "sent 9 to bob" in approved.stdout  # merged: `to` kept
    assert tool_failed.returncode == 1 and "limit exceeded: 500" in tool_failed.stdout
    assert every.returncode == 0 and "sent 8 to bob" in every.stdout  # the batch's first call waited its turn
    assert nothing_left.returncode != 0 and nothing_left.stdout == "", nothing_left
