"""How the text of one environment variable becomes a setting's value (workers/settings.py reads them all).

Each parser names the variable in its one-line error, so a bad value stops a process at start with the reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from durable_agent.agent.model_settings import ModelSettings, check_settings_json

T = TypeVar("T")
_PROVIDER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")  # the `provider` of a `provider:model` spec


def tristate(value: str | None) -> bool | None:
    """1/true/yes/on, anything else off; unset, empty or `auto` is None (let the process decide)."""
    if value is None or value.strip().lower() in ("", "auto"):
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


def model_settings(env: Mapping[str, str], var: str) -> ModelSettings | None:
    """JSON model settings (agent/model_settings.py), or None when unset."""
    value = env.get(var, "").strip()
    return check_settings_json(value, source=var) if value else None


def positive_number(env: Mapping[str, str], var: str, kind: type[int] | type[float]) -> Any:
    """A number greater than 0, or None when unset."""
    value = env.get(var, "").strip()
    if not value:
        return None
    try:
        number = kind(value)
    except ValueError:
        raise ValueError(f"{var} must be a number, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"{var} must be greater than 0, not {value!r}")
    return number


def whole_number(env: Mapping[str, str], var: str, default: int) -> int:
    """A whole number, 0 or more; unset or empty: `default`."""
    value = env.get(var, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise ValueError(f"{var} must be a whole number (0 or more), not {value!r}")
    return int(value)


def provider_map(env: Mapping[str, str], var: str, kind: type[str] | type[float]) -> dict[str, Any]:
    """`provider=value,...` (e.g. DAGENT_PROVIDER_QUEUES=anthropic=models-anthropic,openai=models-openai)."""
    entries: dict[str, Any] = {}
    for item in (part.strip() for part in env.get(var, "").split(",")):
        if not item:
            continue
        provider, sep, value = (piece.strip() for piece in item.partition("="))
        if not sep or not _PROVIDER_NAME.fullmatch(provider) or not value:
            raise ValueError(f"{var} must be provider=value pairs separated by commas "
                             f"(e.g. anthropic=..., openai=...), not {item!r}")
        if provider in entries:
            raise ValueError(f"{var} names {provider} twice")
        entries[provider] = positive_number({var: value}, var, float) if kind is float else value
    return entries


def pem(env: Mapping[str, str], name: str) -> str | None:
    """A PEM key given inline (`NAME`) or as a file path (`NAME_FILE`)."""
    if value := env.get(name):
        return value
    if path := env.get(f"{name}_FILE"):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    return None


def naming_variables(read: Callable[..., T]) -> Callable[..., T]:
    """`read` (a settings model's classmethod body) with its validation errors as one `ValueError` line, each
    naming its environment variable (the field's description starts with it) rather than the field."""
    @functools.wraps(read)
    def named(cls: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return read(cls, *args, **kwargs)
        except ValidationError as exc:
            raise ValueError("; ".join(f"{_variable(error['loc'], cls.model_fields)}: {error['msg']}"
                                       for error in exc.errors())) from None
    return named


def _variable(location: tuple[int | str, ...], fields: Mapping[str, FieldInfo]) -> str:
    name = str(location[0]) if location else "value"
    field = fields.get(name)
    described = (field.description or "").split(":")[0] if field is not None else ""
    return described.split()[0] if described.startswith(("DAGENT_", "TEMPORAL_")) else name


def one_of(env: Mapping[str, str], name: str, choices: Any, default: str) -> Any:
    """A variable whose value is one of a `Literal`'s (case and spaces ignored; unset or empty: `default`), or a
    one-line ValueError naming them."""
    allowed: tuple[str, ...] = get_args(choices)
    value = env.get(name, "").strip().lower() or default
    if value not in allowed:
        raise ValueError(f"{name} must be {', '.join(allowed[:-1])} or {allowed[-1]}, not {env.get(name)!r}")
    return value
