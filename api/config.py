"""The API's configuration: who may call it (API keys, OIDC), the decision-signing key and limits.

Read from a TOML file (`DAGENT_API_CONFIG` or `dagent api --config`) plus environment variables:

    max_body_bytes = 65536
    heartbeat_seconds = 15

    [[api_keys]]                       # bearer API keys mapped to principals (the embedded default)
    principal = "alice"
    roles = ["approver"]
    key_sha256 = "<sha256 hex of the key>"   # or `key = "..."` (plain, for local use only)

    [oidc]                             # JWT bearer tokens verified against a JWKS (real deployments)
    jwks_url = "https://issuer.example/.well-known/jwks.json"
    issuer = "https://issuer.example/"         # required: tokens must name this `iss`
    audience = "durable-agent"                 # required: tokens must name this `aud`
    principal_claim = "sub"
    roles_claim = "roles"

Strict: a configuration that would accept more than it says refuses to load, in one line that names no secret
(OIDC without an issuer or an audience; a decision private key that is not an Ed25519 private key in PEM).
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from durable_agent.agent.identity import principal_problem
from durable_agent.agent.strict import StrictModel
from durable_agent.api.slack_config import SlackApiConfig
from durable_agent.config.env_values import pem

DEFAULT_MAX_BODY_BYTES = 256 * 1024


class ApiConfigError(ValueError):
    """The API configuration is unusable or unsafe; one line, never a key."""


class _Model(StrictModel):
    model_config = ConfigDict(hide_input_in_errors=True)  # errors never echo keys


class ApiKey(_Model):
    principal: str = Field(min_length=1)
    roles: list[str] = Field(default_factory=list)
    key: str | None = Field(default=None, min_length=16)
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    email: str | None = Field(default=None, description="Matches a Slack user by profile e-mail (api/slack_config.py).")

    @field_validator("principal")
    @classmethod
    def _one_person(cls, principal: str) -> str:
        if (problem := principal_problem(principal)) is not None:
            raise ValueError(problem)
        return principal

    @model_validator(mode="after")
    def _one_key(self) -> ApiKey:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError(f"api key of {self.principal!r}: give exactly one of `key` or `key_sha256`")
        return self

    @property
    def digest(self) -> str:
        return self.key_sha256 or hashlib.sha256((self.key or "").encode()).hexdigest()


class OidcConfig(_Model):
    jwks_url: str = Field(min_length=1)
    issuer: str | None = Field(default=None, description="Required: the `iss` every token must carry.")
    audience: str | None = Field(default=None, description="Required: the `aud` every token must carry.")
    principal_claim: str = "sub"
    roles_claim: str = "roles"
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "EdDSA"])

    @model_validator(mode="after")
    def _issuer_and_audience(self) -> OidcConfig:
        missing = [name for name, value in (("issuer", self.issuer), ("audience", self.audience)) if not value]
        if missing:
            raise ValueError(f"OIDC needs {' and '.join(missing)} ([oidc] {' / '.join(missing)} or "
                             f"{', '.join('DAGENT_OIDC_' + m.upper() for m in missing)}): without them a token "
                             "the identity provider minted for any other application would be accepted")
        return self


class ApiConfig(_Model):
    api_keys: list[ApiKey] = Field(default_factory=list)
    oidc: OidcConfig | None = None
    approver_roles: list[str] = Field(default_factory=lambda: ["approver"])
    admin_roles: list[str] = Field(default_factory=lambda: ["admin"])
    decision_private_key: str | None = Field(default=None, description="Ed25519 private key (PEM) that signs "
                                                                        "decision tokens; never in logs.")
    decision_token_seconds: int = Field(default=300, ge=10)
    pending_query_seconds: float = Field(default=5.0, gt=0, description=(
        "How long the approvals list waits for one prompt's worker to answer before leaving that prompt out."))
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    public_url: str = Field(default="", description="Where browsers reach the API (for printed links).")
    schedules_per_user: int = Field(default=20, ge=0, description="How many schedules a non-admin may have.")
    min_schedule_interval_seconds: float = Field(default=60.0, ge=1, description=(
        "The shortest `every` a non-admin may schedule (a cron expression runs at most once a minute)."))
    slack: SlackApiConfig | None = None  # Slack's Approve/Reject buttons (api/routes/slack.py)

    @field_validator("decision_private_key")
    @classmethod
    def _ed25519_private_key(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            key = load_pem_private_key(value.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"the decision private key (DAGENT_DECISION_PRIVATE_KEY) is not a PEM private key "
                             f"without a password: {type(exc).__name__}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"the decision private key (DAGENT_DECISION_PRIVATE_KEY) must be Ed25519, "
                             f"not {type(key).__name__}")
        return value

    @classmethod
    def load(cls, path: Path | None = None, env: Mapping[str, str] | None = None) -> ApiConfig:
        env = os.environ if env is None else env
        path = path or (Path(env["DAGENT_API_CONFIG"]) if env.get("DAGENT_API_CONFIG") else None)
        data = tomllib.loads(path.read_text()) if path else {}
        if key := pem(env, "DAGENT_DECISION_PRIVATE_KEY"):
            data["decision_private_key"] = key
        for key, name in (("signing_secret", "DAGENT_SLACK_SIGNING_SECRET"), ("bot_token", "DAGENT_SLACK_BOT_TOKEN")):
            if env.get(name) and isinstance(data.get("slack"), dict):
                data["slack"][key] = env[name]
        if jwks := env.get("DAGENT_OIDC_JWKS_URL"):
            data["oidc"] = {"jwks_url": jwks, "issuer": env.get("DAGENT_OIDC_ISSUER") or None,
                            "audience": env.get("DAGENT_OIDC_AUDIENCE") or None}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ApiConfigError(f"API config{f' {path}' if path else ''}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """A validation error in one line: `where: what; ...` (inputs are hidden, so no key is ever shown)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg'].removeprefix('Value error, ')}"
                     for e in exc.errors())
