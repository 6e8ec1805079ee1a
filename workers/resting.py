"""Prompts that wait for a person leave the worker's workflow cache, beyond the most recent few.

A cached workflow run costs a worker about 250 KiB (the SDK's instance, its sandbox and the core's state of the
run). Temporal's cache evicts the least recently used run only when it is full, so a worker whose prompts wait
for approvals keeps a full cache of runs that may not move for days. Here a worker keeps at most `keep` runs
that rest: whose last workflow task said `waiting_for_approval` (the `PromptState` search attribute it
upserted) and that have no activation running. Older resting runs are evicted; the decision that wakes one
replays its history, as on a worker that never had it. Running prompts are never evicted early.

An evicted run's objects are freed by Python's cycle collector, whose full collection may not come for
minutes; until then they hold the memory the eviction was for. So a collection follows the evictions, at
most one per second and, when collections are slow, spaced to take at most a twentieth of the time.

`WatchedRunner` wraps the worker's workflow runner: each instance it creates reports its activations and the
state its workflow tasks upsert to that worker's `RestingRuns`. `evict_resting` asks the worker's core to evict
through the SDK's bridge worker (`request_workflow_eviction`, which the SDK does not expose as public API):
`eviction_door` finds it, or returns None on an SDK without it, and the cache then works as Temporal's does.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import decode_typed_search_attributes
from temporalio.worker import WorkflowInstance, WorkflowRunner

from durable_agent.agent.logging import get_logger
from durable_agent.workflows.names import PROMPT_STATE
from durable_agent.workflows.sdk_private import workflow_eviction

if TYPE_CHECKING:
    import temporalio.workflow
    from temporalio.converter import SerializationContext, StorageDriverStoreContext
    from temporalio.worker import WorkflowInstanceDetails

    from durable_agent.workflows.sdk_private import CommandInfo, WorkflowDefinition

log = get_logger(__name__)

RESTING_STATE = "waiting_for_approval"
SWEEP_SECONDS = 0.25
# Evictions are asked a few at a time: each eviction is a workflow activation on the SDK's thread pool, which
# starts a thread for every activation that finds no idle one (and each thread keeps its own malloc arena).
EVICTIONS_AT_ONCE = 2
BETWEEN_EVICTIONS = 0.02


def upserted_state(completion: WorkflowActivationCompletion) -> str | None:
    """The last `PromptState` a successful workflow task upserted, if it upserted one."""
    state = None
    for command in completion.successful.commands:
        if command.HasField("upsert_workflow_search_attributes"):
            try:
                attributes = decode_typed_search_attributes(command.upsert_workflow_search_attributes.search_attributes)
            except Exception:  # not what the SDK writes: this command says nothing about the state
                continue
            state = attributes.get(PROMPT_STATE, state)
    return state


@dataclass
class _Run:
    owner: int  # id() of the instance: a run replayed after its eviction is a new instance
    last_active: float
    busy: bool = False
    resting: bool = False


@dataclass
class RestingRuns:
    """The runs a worker has cached: when each last had an activation, and whether it rests.

    Instances report from the workflow task threads; `evict_resting` reads from the event loop."""

    clock: Callable[[], float] = time.monotonic
    _runs: dict[str, _Run] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _run(self, run_id: str, owner: int) -> _Run:
        run = self._runs.get(run_id)
        if run is None or run.owner != owner:
            run = self._runs[run_id] = _Run(owner, self.clock())
        return run

    def started(self, run_id: str, owner: int) -> None:
        with self._lock:
            self._run(run_id, owner).busy = True

    def finished(self, run_id: str, owner: int, completion: WorkflowActivationCompletion) -> None:
        with self._lock:
            run = self._run(run_id, owner)
            run.busy, run.last_active = False, self.clock()
            if completion.HasField("successful"):
                state = upserted_state(completion)
                if state is not None:
                    run.resting = state == RESTING_STATE

    def forget(self, run_id: str, owner: int) -> None:
        """The instance `owner` is gone (evicted); a newer instance of the run keeps its entry."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.owner == owner:
                del self._runs[run_id]

    def beyond(self, keep: int, *, limit: int | None = None) -> list[str]:
        """The resting runs but the `keep` most recently active (at most `limit`, the oldest first), no longer
        tracked: each is evicted once."""
        with self._lock:
            resting = sorted(((run.last_active, run_id) for run_id, run in self._runs.items()
                              if run.resting and not run.busy))
            due = [run_id for _, run_id in resting[:max(len(resting) - keep, 0)][:limit]]
            for run_id in due:
                del self._runs[run_id]
        return due

    def resting(self) -> int:
        with self._lock:
            return sum(1 for run in self._runs.values() if run.resting)

    def __len__(self) -> int:
        return len(self._runs)


class _WatchedInstance(WorkflowInstance):
    """The runner's instance, reporting each activation to `RestingRuns`; otherwise the instance itself."""

    def __init__(self, inner: WorkflowInstance, runs: RestingRuns, run_id: str) -> None:
        self._inner, self._runs, self._run_id = inner, runs, run_id
        weakref.finalize(self, runs.forget, run_id, id(self))  # evicted: the SDK dropped this instance

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        self._runs.started(self._run_id, id(self))
        completion = WorkflowActivationCompletion()
        try:
            completion = self._inner.activate(act)
        finally:
            self._runs.finished(self._run_id, id(self), completion)
        return completion

    def get_serialization_context(self, command_info: CommandInfo | None) -> SerializationContext | None:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: CommandInfo | None) -> StorageDriverStoreContext:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()


class WatchedRunner(WorkflowRunner):
    """`inner`'s instances, each reporting to this worker's `runs`."""

    def __init__(self, inner: WorkflowRunner, runs: RestingRuns | None = None) -> None:
        self.inner = inner
        self.runs = runs if runs is not None else RestingRuns()

    def prepare_workflow(self, defn: WorkflowDefinition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _WatchedInstance(self.inner.create_instance(det), self.runs, det.info.run_id)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


# The worker core's `request_workflow_eviction`, where temporalio 1.35 has it; None on an SDK without it.
eviction_door = workflow_eviction


@dataclass
class Collections:
    """Full collections of the garbage evicted runs leave: each at least `min_gap` seconds after the last, and
    spaced to `share` of the time at most (a collection that took 50 ms waits a second after it)."""

    min_gap: float = 1.0
    share: float = 0.05
    clock: Callable[[], float] = time.monotonic
    pending: bool = False
    next_at: float = 0.0

    def after_evictions(self) -> None:
        self.pending = True

    def maybe_collect(self) -> bool:
        now = self.clock()
        if not self.pending or now < self.next_at:
            return False
        gc.collect()
        took = self.clock() - now
        self.pending = False
        self.next_at = now + max(self.min_gap, took / self.share)
        return True


async def evict_resting(runs: RestingRuns, evict: Callable[[str], None], keep: int, *,
                        period: float = SWEEP_SECONDS, collections: Collections | None = None) -> None:
    """Every `period`, evict the resting runs beyond the `keep` most recent, then collect what they left (the
    next sweep: the SDK drops an instance once its eviction activation ran). Runs until cancelled."""
    collections = collections or Collections()
    pause = period
    while True:
        await asyncio.sleep(pause)
        collections.maybe_collect()
        due = runs.beyond(keep, limit=EVICTIONS_AT_ONCE)
        pause = BETWEEN_EVICTIONS if len(due) == EVICTIONS_AT_ONCE else period
        for run_id in due:
            try:
                evict(run_id)
            except Exception as exc:  # the run stays cached, under the cache's own eviction
                log.warning("workflow_cache.evict_failed", run_id=run_id, error=str(exc))
        if due:
            collections.after_evictions()
            log.debug("workflow_cache.evicted_resting", runs=len(due), kept=keep)
