"""Configuration: one `Settings`, read once from the environment (`Settings.from_env()`).

This is the only module that reads environment variables. Everything else receives a `Settings` (or the
values it needs from one). Defaults run offline out of the box: a local dev server, the scripted demo
model and the demo plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.converter import DataConverter

from agent.model_settings import ModelSettings, check_settings_json
from workers.storage import DEFAULT_PAYLOAD_THRESHOLD, data_converter

DEFAULT_TASK_QUEUE = "durable-agent"
DEMO_MODEL = "scripted:plugins.demo:demo_model"
DEMO_PLUGINS = "plugins.demo:plugin"
WorkflowSandbox = Literal["off", "on", "strict"]


def _tristate(value: str | None) -> bool | None:
    if value is None or value.strip().lower() in ("", "auto"):
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


def _model_settings(env: Mapping[str, str], var: str) -> ModelSettings | None:
    value = env.get(var, "").strip()
    return check_settings_json(value, source=var) if value else None


def _sandbox(value: str) -> WorkflowSandbox:
    if value not in ("off", "on", "strict"):
        raise ValueError(f"DAGENT_WORKFLOW_SANDBOX must be off, on or strict, not {value!r}")
    return value  # type: ignore[return-value]


def _pem(env: Mapping[str, str], name: str) -> str | None:
    """A PEM key given inline (`NAME`) or as a file path (`NAME_FILE`)."""
    if value := env.get(name):
        return value
    if path := env.get(f"{name}_FILE"):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    return None


class Settings(BaseModel):
    """Everything a client or worker needs to know; each field names the variable it is read from.

    API keys are not fields: providers read them from `provider_env` when a worker builds them, so they
    never travel in workflow inputs, results or history, and never show in a repr or a log line.
    """

    model_config = ConfigDict(frozen=True)

    # --- both client and worker ---
    temporal_address: str = Field(default="127.0.0.1:7233", description="TEMPORAL_ADDRESS: the frontend, host:port.")
    namespace: str = Field(default="default", description="TEMPORAL_NAMESPACE.")
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE,
                            description="DAGENT_TASK_QUEUE: where prompts are started and workers poll.")
    payload_dir: str = Field(default=".dagent/payloads", description=(
        "DAGENT_PAYLOAD_DIR: where payloads above `payload_threshold` are stored outside history; clients "
        "and workers must share it."))
    payload_threshold: int = Field(default=DEFAULT_PAYLOAD_THRESHOLD, ge=1, description=(
        "DAGENT_PAYLOAD_THRESHOLD: payloads of this many bytes or more go to `payload_dir`."))
    log_level: str = Field(default="INFO", description="DAGENT_LOG_LEVEL.")

    # --- client only ---
    ui_url: str = Field(default="http://127.0.0.1:8233", description="DAGENT_UI_URL: links to the Temporal UI.")

    # --- worker only ---
    model_normal: str = Field(default=DEMO_MODEL, description=(
        "DAGENT_MODEL_NORMAL: `provider:model` of the normal tier (e.g. `openai:gpt-4o`)."))
    model_high: str = Field(default="", description="DAGENT_MODEL_HIGH: the high tier; empty = the normal one.")
    model_settings_normal: ModelSettings | None = Field(default=None, description=(
        "DAGENT_MODEL_SETTINGS_NORMAL: JSON model settings of the normal tier (see agent/model_settings.py)."))
    model_settings_high: ModelSettings | None = Field(default=None, description=(
        "DAGENT_MODEL_SETTINGS_HIGH: JSON model settings of the high tier (default: the normal tier's when "
        "the high tier uses the normal model)."))
    model_fallback_attempts: int = Field(default=3, description=(
        "DAGENT_MODEL_FALLBACK_ATTEMPTS: attempts of a retryable failure before a fallback chain moves on."))
    plugins: tuple[str, ...] = Field(default=(DEMO_PLUGINS,), description=(
        "DAGENT_PLUGINS: comma-separated `module:attribute` plugin paths (empty for none)."))
    file_dir: str = Field(default=".dagent/files", description="DAGENT_FILE_DIR: where tools store files.")
    stream_text: bool | None = Field(default=None, description=(
        "DAGENT_STREAM_TEXT: stream model text to watchers (1/0; unset or `auto` = when the provider can)."))
    prices: str = Field(default="", description=(
        "DAGENT_PRICES: model prices as inline JSON or the path of a JSON file (see agent/pricing.py)."))
    workflow_sandbox: WorkflowSandbox = Field(default="off", description=(
        "DAGENT_WORKFLOW_SANDBOX: Temporal's workflow sandbox: `off`, `on` (our modules passed through) or "
        "`strict` (every test worker and the replay tests)."))
    max_cached_workflows: int = Field(default=64, ge=0, description=(
        "DAGENT_MAX_CACHED_WORKFLOWS: workflows a worker keeps in memory; waiting prompts beyond this are "
        "evicted and replayed when needed."))
    provider_env: Mapping[str, str] = Field(default_factory=dict, repr=False, exclude=True, description=(
        "The environment providers read their API keys and base URLs from (never serialised or shown)."))
    decision_public_key: str | None = Field(default=None, repr=False, description=(
        "DAGENT_DECISION_PUBLIC_KEY (PEM) or DAGENT_DECISION_PUBLIC_KEY_FILE: decisions on approvals must carry "
        "a token signed by the matching private key (held by `dagent api`); unset = unsigned decisions."))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        defaults = cls()
        plugins = env.get("DAGENT_PLUGINS")
        return cls(
            temporal_address=env.get("TEMPORAL_ADDRESS", defaults.temporal_address),
            namespace=env.get("TEMPORAL_NAMESPACE", defaults.namespace),
            task_queue=env.get("DAGENT_TASK_QUEUE", defaults.task_queue),
            payload_dir=env.get("DAGENT_PAYLOAD_DIR", defaults.payload_dir),
            payload_threshold=int(env.get("DAGENT_PAYLOAD_THRESHOLD", defaults.payload_threshold)),
            log_level=env.get("DAGENT_LOG_LEVEL", defaults.log_level),
            ui_url=env.get("DAGENT_UI_URL", defaults.ui_url),
            model_normal=env.get("DAGENT_MODEL_NORMAL", defaults.model_normal),
            model_high=env.get("DAGENT_MODEL_HIGH", defaults.model_high),
            model_settings_normal=_model_settings(env, "DAGENT_MODEL_SETTINGS_NORMAL"),
            model_settings_high=_model_settings(env, "DAGENT_MODEL_SETTINGS_HIGH"),
            model_fallback_attempts=int(env.get("DAGENT_MODEL_FALLBACK_ATTEMPTS", defaults.model_fallback_attempts)),
            plugins=tuple(p.strip() for p in plugins.split(",") if p.strip()) if plugins is not None
            else defaults.plugins,
            file_dir=env.get("DAGENT_FILE_DIR", defaults.file_dir),
            stream_text=_tristate(env.get("DAGENT_STREAM_TEXT")),
            prices=env.get("DAGENT_PRICES", defaults.prices),
            workflow_sandbox=_sandbox(env.get("DAGENT_WORKFLOW_SANDBOX", defaults.workflow_sandbox)),
            max_cached_workflows=int(env.get("DAGENT_MAX_CACHED_WORKFLOWS", defaults.max_cached_workflows)),
            provider_env=env,
            decision_public_key=_pem(env, "DAGENT_DECISION_PUBLIC_KEY"),
        )

    def data_converter(self) -> DataConverter:
        return data_converter(self.payload_dir, threshold=self.payload_threshold)

    @property
    def model_tiers(self) -> dict[str, str]:
        return {"normal": self.model_normal, "high": self.model_high or self.model_normal}

    @property
    def tier_settings(self) -> dict[str, ModelSettings]:
        """Each tier's model settings; the high tier falls back to the normal tier's, as its model does."""
        normal = self.model_settings_normal or ModelSettings()
        high = self.model_settings_high or (normal if not self.model_high else ModelSettings())
        return {"normal": normal, "high": high}

    def workflow_url(self, workflow_id: str) -> str:
        return f"{self.ui_url.rstrip('/')}/namespaces/{self.namespace}/workflows/{workflow_id}"
