"""`Settings` refuses numbers its users could never mean, whether it is built in code or read from the
environment (`from_env` already refused them for the variables; the fields now say it themselves)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agent.workers.settings import Settings, tasks_fit_cache


@pytest.mark.parametrize(("field", "value"), [
    ("model_fallback_attempts", 0), ("model_concurrency", 0), ("model_rate", 0.0), ("model_rate", -1.5),
    ("model_worker_rate", 0.0), ("metrics_port", 0), ("metrics_port", 65536), ("max_cached_workflows", -1),
    ("payload_threshold", 0), ("max_workflow_tasks", 1),
])
def test_an_impossible_number_is_refused_with_the_fields_name(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


@pytest.mark.parametrize(("field", "value"), [
    ("model_fallback_attempts", 1), ("model_concurrency", 1), ("model_rate", 0.5), ("model_worker_rate", 2.0),
    ("metrics_port", 9464), ("metrics_port", None), ("max_cached_workflows", 0), ("max_workflow_tasks", 2),
])
def test_the_smallest_sensible_numbers_are_kept(field: str, value: float | None) -> None:
    assert getattr(Settings(**{field: value}), field) == value


@pytest.mark.parametrize(("calls", "cache", "tasks", "slots"), [
    ("local", 64, None, 32), ("local", 1000, None, 100), ("local", 0, None, None), ("local", 3, None, 2),
    ("local", 1, None, 2), ("activity", 64, None, None), ("activity", 64, 7, 7), ("local", 8, 100, 100),
])
def test_a_worker_with_local_model_calls_runs_half_as_many_workflow_tasks_as_it_caches(
        calls: str, cache: int, tasks: int | None, slots: int | None) -> None:
    """Unless told otherwise; None is the SDK's default (100), kept for model calls as activities and with no cache
    (nothing to evict)."""
    settings = Settings(model_calls=calls, max_cached_workflows=cache, max_workflow_tasks=tasks)  # type: ignore[arg-type]
    assert settings.workflow_task_slots == slots


@pytest.mark.parametrize(("calls", "cache", "tasks", "fits"), [
    ("local", 64, None, True), ("activity", 64, None, False), ("activity", 0, None, True), ("activity", 64, 16, True),
    ("local", 64, 32, True), ("local", 64, 33, False), ("local", 64, 64, False), ("local", 1, None, False),
])
def test_whether_a_worker_fits_local_model_calls(calls: str, cache: int, tasks: int | None, fits: bool) -> None:
    """As `create_worker` judges the worker the plugin configured from these settings."""
    settings = Settings(model_calls=calls, max_cached_workflows=cache, max_workflow_tasks=tasks)  # type: ignore[arg-type]
    assert tasks_fit_cache(settings.max_cached_workflows, settings.workflow_task_slots) is fits


def test_the_environment_still_says_which_variable_is_wrong() -> None:
    with pytest.raises(ValueError, match="DAGENT_MODEL_CONCURRENCY must be greater than 0"):
        Settings.from_env({"DAGENT_MODEL_CONCURRENCY": "0"})
    with pytest.raises(ValueError, match="DAGENT_MAX_WORKFLOW_TASKS must be a number"):
        Settings.from_env({"DAGENT_MAX_WORKFLOW_TASKS": "many"})
    assert Settings.from_env({"DAGENT_MAX_WORKFLOW_TASKS": "12"}).workflow_task_slots == 12
    assert Settings.from_env({"DAGENT_MODEL_CALLS": "local"}).workflow_task_slots == 32
    with pytest.raises(ValueError, match=r"^DAGENT_METRICS_PORT: Input should be less than or equal to 65535$"):
        Settings.from_env({"DAGENT_METRICS_PORT": "70000"})


@pytest.mark.parametrize(("variable", "field", "choices"), [
    ("DAGENT_WORKER_QUEUES", "worker_queues", "all, workflows or models"),
    ("DAGENT_WORKFLOW_SANDBOX", "workflow_sandbox", "off, on or strict"),
    ("DAGENT_MODEL_CALLS", "model_calls", "activity or local"),
    ("DAGENT_GRPC_COMPRESSION", "grpc_compression", "auto, gzip or none"),
    ("DAGENT_DECISIONS", "decisions", "open or signed"),
])
def test_a_variable_of_named_choices_lists_them_in_one_line(variable: str, field: str, choices: str) -> None:
    with pytest.raises(ValueError, match=f"^{variable} must be {choices}, not 'some'$"):
        Settings.from_env({variable: "some"})
    default = getattr(Settings(), field)
    assert getattr(Settings.from_env({variable: ""}), field) == default  # empty: the default
    assert getattr(Settings.from_env({variable: f" {default.upper()} "}), field) == default
