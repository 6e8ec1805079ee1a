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
    issuer = "https://issuer.example/"
    audience = "durable-agent"
    principal_claim = "sub"
    roles_claim = "roles"
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent.workers.settings import _pem

DEFAULT_MAX_BODY_BYTES = 256 * 1024


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApiKey(_Model):
    principal: str = Field(min_length=1)
    roles: list[str] = Field(default_factory=list)
    key: str | None = Field(default=None, min_length=16)
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_key(self) -> ApiKey:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError(f"api key of {self.principal!r}: give exactly one of `key` or `key_sha256`")
        return self

    @property
    def digest(self) -> str:
        return self.key_sha256 or hashlib.sha256((self.key or "").encode()).hexdigest()


class OidcConfig(_Model):
    jwks_url: str
    issuer: str | None = None
    audience: str | None = None
    principal_claim: str = "sub"
    roles_claim: str = "roles"
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "EdDSA"])


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

    @classmethod
    def load(cls, path: Path | None = None, env: Mapping[str, str] | None = None) -> ApiConfig:
        env = os.environ if env is None else env
        path = path or (Path(env["DAGENT_API_CONFIG"]) if env.get("DAGENT_API_CONFIG") else None)
        data = tomllib.loads(path.read_text()) if path else {}
        config = cls.model_validate(data)
        update: dict[str, object] = {}
        if key := _pem(env, "DAGENT_DECISION_PRIVATE_KEY"):
            update["decision_private_key"] = key
        if jwks := env.get("DAGENT_OIDC_JWKS_URL"):
            update["oidc"] = OidcConfig(jwks_url=jwks, issuer=env.get("DAGENT_OIDC_ISSUER"),
                                        audience=env.get("DAGENT_OIDC_AUDIENCE"))
        return config.model_copy(update=update)
