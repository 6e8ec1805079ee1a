"""Model settings: how a model is called (sampling, limits, reasoning, tool use), per tier and per prompt.

Provider-neutral and validated by pydantic when a prompt starts (and when a worker reads its tier settings),
so a typo fails at once with a clear error instead of at the provider. Each adapter maps the fields its API
has and leaves out the ones it has not (see README, "Models and providers"); `extra` is merged into the
request body as is, for anything provider-specific.

A prompt's settings are layered over its tier's: every field the prompt sets wins, `extra` is merged key by
key (a prompt can change a tier's setting, not unset it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, JsonValue, model_validator

from durable_agent.agent.strict import StrictModel

ReasoningEffort = Literal["minimal", "low", "medium", "high"]
ReasoningSummary = Literal["auto", "concise", "detailed"]
ToolChoiceMode = Literal["auto", "required", "none"]


class ModelSettings(StrictModel):
    """Every field is optional: `None` means "the provider's default" (or the tier's, for a prompt)."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    stop: list[str] | None = Field(default=None, min_length=1, max_length=4,
                                   description="Stop sequences (OpenAI accepts at most 4).")
    seed: int | None = None
    reasoning_effort: ReasoningEffort | None = None
    reasoning_budget_tokens: int | None = Field(
        default=None, ge=1024, description="Anthropic extended thinking budget (at least 1024 tokens).")
    reasoning_summary: ReasoningSummary | None = Field(
        default=None, description="OpenAI Responses: ask for reasoning summaries to show the user.")
    parallel_tool_calls: bool | None = None
    tool_choice: ToolChoiceMode | str | None = Field(
        default=None, description="auto, required, none, or the id of the one tool the model must call.")
    prompt_cache: bool | None = Field(
        default=None, description="Prompt caching (Anthropic cache_control, OpenAI prompt_cache_key); on by default.")
    extra: dict[str, JsonValue] = Field(
        default_factory=dict, description="Merged into the provider's request body as is.")

    @model_validator(mode="after")
    def _consistent(self) -> ModelSettings:
        if (self.reasoning_budget_tokens is not None and self.max_output_tokens is not None
                and self.max_output_tokens <= self.reasoning_budget_tokens):
            raise ValueError(f"max_output_tokens ({self.max_output_tokens}) must be greater than "
                             f"reasoning_budget_tokens ({self.reasoning_budget_tokens})")
        if isinstance(self.tool_choice, str) and not self.tool_choice.strip():
            raise ValueError("tool_choice must not be empty")
        return self

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every field `override` sets (is not None) on top; `extra` merged key by key.

        (None means "not set" rather than `model_fields_set`, which does not survive a JSON round trip.)"""
        if override is None:
            return self
        fields = {name: value for name in type(override).model_fields if name != "extra"
                  if (value := getattr(override, name)) is not None}
        fields["extra"] = {**self.extra, **override.extra}
        return self.model_copy(update=fields)

    @property
    def caching(self) -> bool:
        return self.prompt_cache is not False

    def summary(self) -> str:
        """`temperature=0.2 max_output_tokens=500 extra=[top_k]`: the fields that are set, for summaries."""
        parts = [f"{name}={','.join(value) if isinstance(value, list) else value}"
                 for name, value in self.model_dump(exclude_none=True, exclude={"extra"}).items()]
        if self.extra:
            parts.append(f"extra=[{','.join(sorted(self.extra))}]")
        return " ".join(parts)


def check_settings_json(text: str, *, source: str) -> ModelSettings:
    """Parse settings JSON from configuration, naming where it came from in the error."""
    try:
        return ModelSettings.model_validate_json(text)
    except ValueError as exc:
        raise ValueError(f"{source}: invalid model settings: {exc}") from exc
