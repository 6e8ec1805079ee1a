"""One strict base model (agent/strict.py): the records, payloads and request bodies all refuse unknown fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from durable_agent.agent import messages, models, tools
from durable_agent.agent.context_window import ContextLimit
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.pricing import Price
from durable_agent.agent.strict import StrictModel
from durable_agent.api import config, schemas
from durable_agent.api.routes import schedules
from durable_agent.plugins.triggers import Trigger
from durable_agent.workflows import decision_tokens, protocol
from durable_agent.workflows.budget.limits import PromptBudget


@pytest.mark.parametrize("model", [
    models.Usage, models.Prompt, messages.UserMessage, protocol.PromptRequest, protocol.ToolInvocation,
    config.ApiKey, schemas.StartPrompt, schedules.CreateSchedule, tools.Approval, Trigger,
    decision_tokens.DecisionClaims,
], ids=lambda m: m.__name__)
def test_every_strict_model_derives_from_the_one_base(model: type) -> None:
    assert issubclass(model, StrictModel)
    assert model.model_config.get("extra") == "forbid"


def test_an_unknown_field_is_refused_not_dropped() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        models.Usage.model_validate({"input_tokens": 1, "input_tokenz": 2})


def test_the_api_config_still_hides_keys_in_its_errors() -> None:
    """api/config.py adds `hide_input_in_errors` on top of the base: a rejected key is never echoed."""
    with pytest.raises(ValidationError) as raised:
        config.ApiKey.model_validate({"principal": "p", "key": "short-secret"})
    assert "short-secret" not in str(raised.value)


def test_no_model_spells_out_its_own_strictness() -> None:
    """Strictness comes from the one base: a model that writes `extra="forbid"` itself is a second copy."""
    root = Path(__file__).resolve().parents[2]
    copies = [str(path.relative_to(root)) for folder in ("agent", "workflows", "activities", "workers", "client",
                                                         "cli", "api", "plugins")
              for path in sorted((root / folder).rglob("*.py"))
              if 'extra="forbid"' in path.read_text() and path != root / "agent" / "strict.py"]
    assert copies == []


@pytest.mark.parametrize("model", [ContextLimit, ModelSettings, Price, PromptBudget], ids=lambda m: m.__name__)
def test_frozen_models_are_strict_through_the_base(model: type) -> None:
    assert issubclass(model, StrictModel)
    assert model.model_config.get("extra") == "forbid" and model.model_config.get("frozen") is True
