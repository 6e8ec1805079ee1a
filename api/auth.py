"""Who is calling: bearer API keys from the config file, or OIDC JWTs verified against a JWKS URL."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Iterable

import jwt
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from durable_agent.agent.identity import principal_problem
from durable_agent.agent.logging import get_logger
from durable_agent.api.config import ApiConfig
from durable_agent.api.problems import Problem

log = get_logger("durable_agent.api.auth")


class Principal(BaseModel):
    """An authenticated caller. `id` is what prompts record as their user and decisions as their approver."""

    model_config = ConfigDict(frozen=True)

    id: str
    roles: frozenset[str] = Field(default_factory=frozenset)
    is_approver: bool = False
    is_admin: bool = False

    @property
    def sees_everything(self) -> bool:
        return self.is_admin or self.is_approver

    @classmethod
    def of(cls, config: ApiConfig, principal_id: str, roles: Iterable[str]) -> Principal:
        """`principal_id` with `roles`: an approver or an admin by the config's role lists."""
        role_set = frozenset(roles)
        return cls(id=principal_id, roles=role_set, is_approver=bool(role_set & set(config.approver_roles)),
                   is_admin=bool(role_set & set(config.admin_roles)))


class Authenticator:
    def __init__(self, config: ApiConfig) -> None:
        self.config = config
        self._keys = {entry.digest: entry for entry in config.api_keys}
        self._jwks = jwt.PyJWKClient(config.oidc.jwks_url, cache_keys=True, lifespan=300) if config.oidc else None

    async def authenticate(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        for known, entry in self._keys.items():
            if hmac.compare_digest(known, digest):
                return Principal.of(self.config, entry.principal, entry.roles)
        if self._jwks is not None and token.count(".") == 2:
            return await self._verify_jwt(token)
        return None

    async def _verify_jwt(self, token: str) -> Principal | None:
        oidc = self.config.oidc
        assert oidc is not None and self._jwks is not None
        try:
            key = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
            # Issuer and audience are required by the config (OidcConfig) and always checked here.
            claims = jwt.decode(token, key.key, algorithms=oidc.algorithms, audience=oidc.audience,
                                issuer=oidc.issuer, options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as exc:
            log.info("jwt refused", reason=type(exc).__name__)
            return None
        principal = claims.get(oidc.principal_claim)
        roles = claims.get(oidc.roles_claim) or []
        if not isinstance(principal, str) or principal_problem(principal) is not None:
            log.info("jwt refused", reason="principal claim is not one person's id")
            return None
        if isinstance(roles, str):
            roles = roles.split()
        return Principal.of(self.config, principal, [r for r in roles if isinstance(r, str)])


async def current_principal(request: Request) -> Principal:
    """FastAPI dependency: the authenticated principal, or a 401 problem."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Problem("unauthenticated", "send `Authorization: Bearer <API key or JWT>`")
    authenticator: Authenticator = request.app.state.authenticator
    principal = await authenticator.authenticate(token.strip())
    if principal is None:
        raise Problem("unauthenticated", "the bearer token is not valid")
    return principal
