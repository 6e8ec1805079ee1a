"""Which cached runs a worker evicts for resting (workers/resting.py): the state a workflow task upserted, the
`keep` most recent resting runs kept, a running activation never evicted, a replayed run's entry not dropped by
its evicted predecessor, and the collections after evictions spaced as documented. (The evictions themselves,
on a real worker and server: tests/temporal/test_resting_eviction.py.)"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.bridge.proto.workflow_commands import UpsertWorkflowSearchAttributes, WorkflowCommand
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion

from durable_agent.workers.resting import Collections, RestingRuns, eviction_door, upserted_state


def _upsert(**attributes: Any) -> WorkflowCommand:
    command = UpsertWorkflowSearchAttributes()
    for key, value in attributes.items():
        command.search_attributes.indexed_fields[key].CopyFrom(
            Payload(metadata={"encoding": b"json/plain", "type": b"Keyword"}, data=json.dumps(value).encode()))
    return WorkflowCommand(upsert_workflow_search_attributes=command)


def _completion(*commands: WorkflowCommand) -> WorkflowActivationCompletion:
    completion = WorkflowActivationCompletion(run_id="r")
    completion.successful.SetInParent()
    completion.successful.commands.extend(commands)
    return completion


def _says(state: str | None) -> WorkflowActivationCompletion:
    return _completion(_upsert(PromptState=state)) if state else _completion()


def test_the_state_is_the_last_prompt_state_upserted() -> None:
    assert upserted_state(_completion()) is None
    assert upserted_state(_completion(_upsert(UserId="ann"))) is None
    assert upserted_state(_says("waiting_for_approval")) == "waiting_for_approval"
    assert upserted_state(_completion(_upsert(PromptState="waiting_for_approval"),
                                      _upsert(UserId="ann", PromptState="running"))) == "running"
    junk = _completion(_upsert(PromptState="waiting_for_approval"))
    junk.successful.commands[0].upsert_workflow_search_attributes.search_attributes.indexed_fields[
        "PromptState"].data = b"not json"
    assert upserted_state(junk) is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_workflow_task_changes_no_state() -> None:
    runs = RestingRuns(clock=Clock())
    runs.started("a", 1)
    runs.finished("a", 1, _says("waiting_for_approval"))
    failed = WorkflowActivationCompletion(run_id="a")
    failed.failed.failure.message = "boom"
    runs.started("a", 1)
    runs.finished("a", 1, failed)
    assert runs.resting() == 1
    runs.started("a", 1)
    runs.finished("a", 1, _completion())  # a query, a signal that decides nothing: still resting
    assert runs.resting() == 1


def test_the_oldest_resting_runs_leave_first_and_once() -> None:
    clock = Clock()
    runs = RestingRuns(clock=clock)
    for n, run_id in enumerate("abcd"):
        clock.now = n
        runs.started(run_id, n)
        runs.finished(run_id, n, _says("waiting_for_approval"))
    clock.now = 10
    runs.started("e", 9)
    runs.finished("e", 9, _says("running"))
    assert runs.beyond(2) == ["a", "b"]
    assert runs.beyond(2) == []  # asked to leave once
    assert runs.beyond(0, limit=1) == ["c"]  # a few at a time, the oldest first
    assert runs.beyond(0) == ["d"]
    assert len(runs) == 1  # e runs


def test_an_evicted_instance_does_not_drop_its_replayed_successor() -> None:
    runs = RestingRuns(clock=Clock())
    runs.started("a", 1)
    runs.finished("a", 1, _says("waiting_for_approval"))
    runs.started("a", 2)  # the decision arrived: replayed in a new instance
    runs.forget("a", 1)  # the old instance is collected after
    assert len(runs) == 1
    runs.finished("a", 2, _says("waiting_for_approval"))
    assert runs.beyond(0) == ["a"]
    runs.forget("a", 2)
    assert len(runs) == 0


# one step: (run, instance, what happens, keep and limit of an eviction sweep)
STEPS = st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 2),
                           st.sampled_from(["start", "waits", "runs", "query", "forget", "tick", "evict"]),
                           st.integers(0, 3), st.none() | st.integers(1, 3)), max_size=60)


@given(STEPS)
def test_only_resting_idle_runs_leave_and_the_newest_stay(steps: list[tuple[str, int, str, int, int | None]]) -> None:
    clock = Clock()
    runs = RestingRuns(clock=clock)
    model: dict[str, dict[str, Any]] = {}  # what each run's newest instance last did
    for run_id, owner, step, keep, limit in steps:
        entry = model.get(run_id)
        fresh = entry is None or entry["owner"] != owner
        if step == "start":
            runs.started(run_id, owner)
            model[run_id] = {"owner": owner, "busy": True, "resting": False if fresh else entry["resting"],
                             "at": clock.now if fresh else entry["at"]}
        elif step in ("waits", "runs", "query"):
            runs.finished(run_id, owner, _says({"waits": "waiting_for_approval", "runs": "running"}.get(step)))
            resting = step == "waits" or (step == "query" and not fresh and entry["resting"])
            model[run_id] = {"owner": owner, "busy": False, "resting": resting, "at": clock.now}
        elif step == "forget":
            runs.forget(run_id, owner)
            if not fresh:
                del model[run_id]
        elif step == "tick":
            clock.now += 1
        else:
            candidates = sorted((e["at"], r) for r, e in model.items() if e["resting"] and not e["busy"])
            left = runs.beyond(keep, limit=limit)
            assert left == [r for _, r in candidates[:max(len(candidates) - keep, 0)]][:limit]
            for r in left:
                assert not model[r]["busy"] and model[r]["resting"]
                del model[r]
        assert len(runs) == len(model)


def test_collections_follow_evictions_spaced_by_their_cost(monkeypatch: Any) -> None:
    clock = Clock()
    done: list[float] = []

    def collect() -> int:
        done.append(clock.now)
        clock.now += 0.2  # a slow collection: the next waits 0.2 / 0.05 = 4 s
        return 0

    monkeypatch.setattr("durable_agent.workers.resting.gc.collect", collect)
    collections = Collections(clock=clock)
    assert not collections.maybe_collect()  # nothing evicted: nothing to collect
    collections.after_evictions()
    assert collections.maybe_collect() and done == [0.0]
    collections.after_evictions()
    clock.now = 3.0
    assert not collections.maybe_collect()
    clock.now = 4.0
    assert collections.maybe_collect() and done == [0.0, 4.0]
    assert not collections.maybe_collect()  # once per eviction batch
    monkeypatch.setattr("durable_agent.workers.resting.gc.collect", lambda: done.append(clock.now) or 0)
    collections.after_evictions()
    clock.now = 10.0
    assert collections.maybe_collect()
    collections.after_evictions()
    clock.now = 10.5
    assert not collections.maybe_collect()  # a fast collection still waits a second
    clock.now = 11.0
    assert collections.maybe_collect()


def test_no_eviction_door_on_an_sdk_without_one() -> None:
    class Bridge:
        def request_workflow_eviction(self, run_id: str) -> None:
            pass

    class NewWorker:
        _bridge_worker = Bridge()

    assert eviction_door(object()) is None  # type: ignore[arg-type]
    assert eviction_door(NewWorker()) is not None  # type: ignore[arg-type]
