"""Loads a worker's notification config (activities/notify_config.py) from `DAGENT_NOTIFY_CONFIG`, with the
secrets from the environment when set there, and delays as people write them (`1d`, `36h`)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from durable_agent.activities.notify_config import NotifyConfig
from durable_agent.config.durations import parse_duration

SECRETS_FROM_ENV = (("slack", "token", "DAGENT_SLACK_BOT_TOKEN"), ("email", "password", "DAGENT_SMTP_PASSWORD"),
                    ("webhook", "secret", "DAGENT_WEBHOOK_SECRET"))


def load_notify_config(path: str | Path | None, env: Mapping[str, str]) -> NotifyConfig:
    """The config, or a one-line ValueError that names the field and never its value."""
    data: dict[str, Any] = tomllib.loads(Path(path).read_text()) if path else {}
    for section, key, name in SECRETS_FROM_ENV:
        if env.get(name) and section in data:
            data[section][key] = env[name]
    default = data.get("default")
    if isinstance(default, dict):
        for key in ("remind_after", "escalate_after"):
            if isinstance(default.get(key), str):
                default[key] = parse_duration(default[key], what=f"[default] {key}")
    try:
        return NotifyConfig.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"notification config {path or ''}: {where}") from None
