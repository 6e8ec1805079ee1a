"""Every bad integer or duration setting is refused in one line naming its environment variable
(docs/configuration.md: "A bad value stops the process at start with one line naming the variable")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_agent.workers.settings import Settings


def _variable(name: str) -> str:
    return (Settings.model_fields[name].description or "").split(":")[0].split()[0]


NUMBERS = (int, float, timedelta, int | None, float | None)
NUMERIC = sorted(name for name, field in Settings.model_fields.items()
                 if field.annotation in NUMBERS and _variable(name).startswith("DAGENT_"))


def test_the_scan_found_the_numeric_settings() -> None:
    assert {"payload_threshold", "max_cached_workflows", "max_workflow_tasks", "metrics_port",
            "graceful_shutdown", "model_fallback_attempts"} <= set(NUMERIC)


@pytest.mark.parametrize("name", NUMERIC)
def test_a_value_that_is_not_a_number_names_its_variable(name: str) -> None:
    variable = _variable(name)
    with pytest.raises(ValueError) as refused:
        Settings.from_env({variable: "1k"})
    message = str(refused.value)
    assert variable in message and "\n" not in message and "invalid literal" not in message, message


def test_a_number_out_of_bounds_names_its_variable() -> None:
    with pytest.raises(ValueError, match=r"^DAGENT_MAX_WORKFLOW_TASKS: Input should be greater than or equal to 2$"):
        Settings.from_env({"DAGENT_MAX_WORKFLOW_TASKS": "1"})
