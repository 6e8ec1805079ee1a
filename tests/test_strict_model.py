"""One strict base model (agent/strict.py): the records, payloads and request bodies all refuse unknown fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agent.agent import messages, models, tools, triggers
from durable_agent.agent.strict import StrictModel
from durable_agent.api import config, schedules, schemas
from durable_agent.workflows import decision_tokens, protocol


@pytest.mark.parametrize("model", [
    models.Usage, models.Prompt, messages.UserMessage, protocol.PromptRequest, protocol.ToolInvocation,
    config.ApiKey, schemas.StartPrompt, schedules.CreateSchedule, tools.Approval, triggers.Trigger,
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
