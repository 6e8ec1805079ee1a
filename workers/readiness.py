"""Worker readiness a deployment can probe: a file written once the server sees this worker poll every queue.

`dagent worker --ready-file PATH` writes PATH (JSON: pid, identity, address, queues, since) when the Temporal
server lists this process as a poller of each of its task queues (`DescribeTaskQueue`), and removes it when
the worker starts draining or exits. `dagent worker-ready --ready-file PATH` exits 0 while the file names a
live process, 1 with a one-line reason otherwise: a container healthcheck or a Kubernetes exec probe.
A worker killed outright leaves the file behind; its pid is then gone, and the check says so.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ValidationError
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent.agent.background import running_alongside
from durable_agent.agent.logging import get_logger

log = get_logger(__name__)

POLL_INTERVAL = 0.2  # seconds between DescribeTaskQueue calls while waiting for the server to see the pollers


class NotReady(Exception):
    """The worker is not ready; the message says why in one line."""


class ReadyState(BaseModel):
    pid: int
    identity: str
    address: str
    queues: list[str]
    since: datetime


class QueuePoll(NamedTuple):
    """One queue the worker must be seen polling, and for which kind of task."""

    task_queue: str
    workflows: bool  # True: the workflow-task poller; False: the activity-task poller


async def _polling(client: Client, poll: QueuePoll, identity: str) -> bool:
    """Whether the server lists `identity` as a poller of the queue's tasks of that kind."""
    kind = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW if poll.workflows else TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
    reply = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=poll.task_queue), task_queue_type=kind), retry=True)
    return any(p.identity == identity for p in reply.pollers)


async def wait_until_polling(client: Client, polls: Sequence[QueuePoll], identity: str) -> None:
    """Return once the server lists `identity` as a poller of every queue in `polls`
    (no timeout: a worker that never gets there stays not-ready, which is what a probe should see)."""
    missing = list(polls)
    while missing:
        try:
            missing = [poll for poll in missing if not await _polling(client, poll, identity)]
        except Exception as exc:  # the server may be restarting: keep trying, the probe says "not ready" meanwhile
            log.warning("readiness check failed", error=str(exc))
        if missing:
            await asyncio.sleep(POLL_INTERVAL)


class ReadyFile:
    """The ready file: written atomically (a reader never sees half of it), removed when no longer ready."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark_ready(self, *, identity: str, address: str, queues: Sequence[str]) -> ReadyState:
        state = ReadyState(pid=os.getpid(), identity=identity, address=address, queues=list(queues),
                           since=datetime.now(UTC))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        partial.write_text(state.model_dump_json())
        partial.replace(self.path)
        return state

    def clear(self) -> None:
        """Remove the file if this process wrote it (another worker's file is left alone)."""
        try:
            state = read_ready(self.path)
        except NotReady:
            return
        if state.pid == os.getpid():
            self.path.unlink(missing_ok=True)


def read_ready(path: Path) -> ReadyState:
    """The ready file's content, or NotReady when it is missing or not a ready file."""
    try:
        return ReadyState.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise NotReady(f"not ready: no ready file at {path} (the worker is starting, draining or stopped)") from None
    except (OSError, ValidationError) as exc:
        raise NotReady(f"not ready: {path} is not a ready file: {str(exc).splitlines()[0]}") from None


def check_ready(path: Path) -> ReadyState:
    """The ready file's content when its worker process is alive; NotReady (one line) otherwise."""
    state = read_ready(path)
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        raise NotReady(f"not ready: worker pid {state.pid} in {path} is not running (a stale ready file)") from None
    except PermissionError:
        pass  # alive, owned by another user
    return state


@asynccontextmanager
async def serve_readiness(client: Client, workers: Sequence[Worker], path: Path | None, *,
                          stopping: asyncio.Event, address: str | None = None,
                          workflow_queue: str | None = None) -> AsyncIterator[None]:
    """While open: write the ready file at `path` once the server sees every worker poll, remove it when
    `stopping` is set (the worker drains) and on exit. No `path` (or no worker): nothing.

    `address` (written in the file) defaults to the client's; `workflow_queue` names the queue whose workflow
    poller must be seen, by default every worker that has workflows (the others are checked for activities).
    A team's own worker: `async with serve_readiness(client, [worker], Path("/tmp/ready"), stopping=event):`."""
    if path is None or not workers:
        yield
        return
    ready = ReadyFile(path)
    address = address or client.service_client.config.target_host

    def polls_workflows(worker: Worker) -> bool:
        if workflow_queue is not None:
            return worker.task_queue == workflow_queue
        return bool(worker.config(active_config=True).get("workflows"))

    polls = [QueuePoll(w.task_queue, polls_workflows(w)) for w in workers]
    identity = workers[0].config().get("identity") or client.identity  # the SDK's default: the client's

    async def serve() -> None:
        await wait_until_polling(client, polls, identity)
        state = ready.mark_ready(identity=identity, address=address, queues=[poll.task_queue for poll in polls])
        log.info("worker ready", ready_file=str(path), since=state.since.isoformat())
        await stopping.wait()
        ready.clear()

    try:
        async with running_alongside(serve()):
            yield
    finally:
        ready.clear()
