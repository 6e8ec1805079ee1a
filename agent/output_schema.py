"""Structured final output: resolve an output schema and check the model's final answer against it.

In activities only; jsonschema loads when a prompt asks for structured output, not with the worker."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

from pydantic import BaseModel, JsonValue, ValidationError


@dataclass(frozen=True)
class OutputSchema:
    """A JSON schema, or a pydantic model named by import path ('package.module:Model')."""

    schema: dict[str, JsonValue]
    model: type[BaseModel] | None = None

    @classmethod
    def resolve(cls, spec: dict[str, JsonValue] | str) -> OutputSchema:
        if isinstance(spec, dict):
            import jsonschema

            jsonschema.Draft202012Validator.check_schema(spec)
            return cls(schema=spec)
        module_name, sep, attr = spec.partition(":")
        model = getattr(importlib.import_module(module_name), attr, None) if sep else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ValueError(f"output schema {spec!r} is not 'module:PydanticModel' nor a JSON schema object")
        return cls(schema=model.model_json_schema(), model=model)

    def instruction(self) -> str:
        return ("When you give your final answer, answer with only a JSON value (no prose, no code fences) "
                f"that matches this JSON schema:\n{json.dumps(self.schema)}")

    def check(self, answer: str | None) -> tuple[JsonValue, str | None]:
        """(data, None) when the answer fits; (None, reason) when it does not."""
        text = (answer or "").strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"the answer is not valid JSON ({exc.msg} at position {exc.pos})"
        if self.model is not None:
            try:
                return self.model.model_validate(data).model_dump(mode="json"), None
            except ValidationError as exc:
                return None, "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        import jsonschema

        errors = sorted(jsonschema.Draft202012Validator(self.schema).iter_errors(data), key=lambda e: list(e.path))
        if errors:
            return None, "; ".join(f"{'.'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:5])
        return data, None
