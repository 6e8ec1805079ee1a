"""Lean payloads: fields at their defaults stay off the wire (workflows/protocol.py re-exports these).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    SerializerFunctionWrapHandler,
    WrapSerializer,
    model_serializer,
)

from durable_agent.agent.models import (
    Prompt,
    PromptOutput,
    Usage,
)
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)


def _without_defaults(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """`data`, the model's own serialization, without the fields at their defaults (the reader fills them in
    again). A union member's tag (`type`, `kind`) stays: the reader needs it to tell the members apart."""
    fields = type(model).model_fields
    return {key: value for key, value in data.items()
            if key in ("type", "kind") or fields[key].is_required() or getattr(model, key) != _default_of(fields[key])}


def _default_of(field: Any) -> Any:
    return field.default_factory() if field.default_factory is not None else field.default


class Lean(_Model):
    """A payload written to history (an activity's input or result, a workflow's input): fields at their
    defaults stay off the wire, so every round's events carry only what says something."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return lean_model(self, handler)


def lean_model(model: BaseModel, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    return _without_defaults(model, handler(model))


def _lean_header(prompt: Prompt, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    data = lean_model(prompt, handler)
    if "usage" in data:
        data["usage"] = _without_defaults(prompt.usage, data["usage"])
    return data


# A model nested in a lean payload, serialized without its own fields at their defaults (one level deep).
LeanUsage = Annotated[Usage, WrapSerializer(lean_model)]
LeanOutput = Annotated[PromptOutput, WrapSerializer(lean_model)]
LeanHeader = Annotated[Prompt, WrapSerializer(_lean_header)]
