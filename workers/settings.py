"""Configuration from environment variables, with defaults that run offline out of the box."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict
from temporalio.converter import DataConverter

from agent.model_settings import ModelSettings, check_settings_json
from workers.storage import data_converter

DEFAULT_TASK_QUEUE = "durable-agent"
DEMO_MODEL = "scripted:plugins.demo:demo_model"
DEMO_PLUGINS = "plugins.demo:plugin"


def _tristate(value: str | None) -> bool | None:
    if value is None or value.strip().lower() in ("", "auto"):
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


def _model_settings(env: Mapping[str, str], var: str) -> ModelSettings | None:
    value = env.get(var, "").strip()
    return check_settings_json(value, source=var) if value else None


class Settings(BaseModel):
    """Everything a client or worker needs to know. Read with `Settings.from_env()`.

    API keys are not here: providers read them from the worker's environment when they are built,
    so they never travel in workflow inputs, results or history.
    """

    model_config = ConfigDict(frozen=True)

    temporal_address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    model_normal: str = DEMO_MODEL
    model_high: str = ""
    model_settings_normal: ModelSettings | None = None
    model_settings_high: ModelSettings | None = None
    model_fallback_attempts: int = 3
    plugins: tuple[str, ...] = (DEMO_PLUGINS,)
    file_dir: str = ".dagent/files"
    ui_url: str = "http://127.0.0.1:8233"
    log_level: str = "INFO"
    stream_text: bool | None = None
    payload_dir: str = ".dagent/payloads"
    payload_threshold: int = 256 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        defaults = cls()
        plugins = env.get("DAGENT_PLUGINS")
        return cls(
            temporal_address=env.get("TEMPORAL_ADDRESS", defaults.temporal_address),
            namespace=env.get("TEMPORAL_NAMESPACE", defaults.namespace),
            task_queue=env.get("DAGENT_TASK_QUEUE", defaults.task_queue),
            model_normal=env.get("DAGENT_MODEL_NORMAL", defaults.model_normal),
            model_high=env.get("DAGENT_MODEL_HIGH", defaults.model_high),
            model_settings_normal=_model_settings(env, "DAGENT_MODEL_SETTINGS_NORMAL"),
            model_settings_high=_model_settings(env, "DAGENT_MODEL_SETTINGS_HIGH"),
            model_fallback_attempts=int(env.get("DAGENT_MODEL_FALLBACK_ATTEMPTS", defaults.model_fallback_attempts)),
            plugins=tuple(p.strip() for p in plugins.split(",") if p.strip()) if plugins is not None
            else defaults.plugins,
            file_dir=env.get("DAGENT_FILE_DIR", defaults.file_dir),
            ui_url=env.get("DAGENT_UI_URL", defaults.ui_url),
            log_level=env.get("DAGENT_LOG_LEVEL", defaults.log_level),
            stream_text=_tristate(env.get("DAGENT_STREAM_TEXT")),
            payload_dir=env.get("DAGENT_PAYLOAD_DIR", defaults.payload_dir),
            payload_threshold=int(env.get("DAGENT_PAYLOAD_THRESHOLD", defaults.payload_threshold)),
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
