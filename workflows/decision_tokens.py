"""Signed decision tokens: how a prompt knows who approved or rejected a call, even from a raw signal.

A worker configured with a decision key (DAGENT_DECISION_PUBLIC_KEY, an Ed25519 public key in PEM) puts
that key on every approval requirement it plans; the key is therefore in the workflow's history, and the
workflow accepts a decision for that call only with a token signed by the matching private key (held by
`dagent api`, never by the worker). The token is a compact JWS (EdDSA) whose claims name the principal, their
roles, the prompt, the call, the decision and a hash of the corrected arguments, and an expiry that is
checked against `workflow.now()`, so verification is deterministic and replays exactly. A token is good for one
decision only: it also binds the run, the tool, the exact arguments and a one-use nonce (docs/approvals-policy.md,
"Decision tokens", has the table of claims).

Pure functions, no I/O: imported by workflow code (passed through the sandbox) and by the API that signs.
jwt and cryptography load on the first token signed or checked, not with the workflows: a worker without a
decision key never needs them (workflow code checks a token inside `workflow.unsafe.imports_passed_through`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue, ValidationError

from durable_agent.agent.strict import StrictModel
from durable_agent.workflows.transcript import json_digest

DecisionKind = Literal["approve", "reject"]
TOKEN_ALGORITHM = "EdDSA"
TOKEN_ISSUER = "durable-agent-api"


class DecisionClaims(StrictModel):
    """What a decision token asserts. `by` on the signal must equal `sub`."""

    iss: Literal["durable-agent-api"] = TOKEN_ISSUER
    sub: str = Field(min_length=1, description="The authenticated principal who decides.")
    roles: list[str] = Field(default_factory=list)
    prompt: str
    call: str
    decision: DecisionKind
    input_sha256: str | None = Field(default=None, description="Hash of the corrected arguments, if any.")
    exp: int = Field(description="Unix seconds after which the token is refused.")
    run: str | None = Field(default=None, description="The run id of the prompt that waits.")
    args_sha256: str | None = Field(default=None, description="Hash of the exact arguments the call runs with "
                                                              "(the model's, merged with any correction).")
    nonce: str | None = Field(default=None, description="Random; the workflow accepts each nonce once.")
    tool: str | None = Field(default=None, description="The tool of the call (as the approver was shown it).")


def input_digest(value: JsonValue) -> str | None:
    """A canonical hash of corrected arguments (None when there are none)."""
    return None if value is None else json_digest(value)


def sign_decision(claims: DecisionClaims, private_key_pem: str) -> str:
    import jwt

    return jwt.encode(claims.model_dump(), private_key_pem, algorithm=TOKEN_ALGORITHM)


def verify_decision(token: str | None, *, public_key_pem: str, prompt_id: str, tool_call_id: str,
                    decision: DecisionKind, by: str | None, corrected_input: JsonValue,
                    now: datetime, run_id: str | None = None, arguments: JsonValue = None,
                    used_nonces: Collection[str] = (), tool: str | None = None) -> DecisionClaims | str:
    """The verified claims, or why the decision must be refused. Only the signature is checked by the JWS
    library; every claim (including the expiry, against the workflow's clock) is checked here: the token must
    also name this run (`run_id`), the call's `tool`, the exact `arguments` the call will run with, and a nonce
    not in `used_nonces`."""
    if not token:
        return "a signed decision token is required for this call (decide through the API)"
    import jwt
    from jwt.api_jws import PyJWS

    try:
        payload = PyJWS().decode(token, key=public_key_pem, algorithms=[TOKEN_ALGORITHM])
        claims = DecisionClaims.model_validate_json(payload)
    except (jwt.InvalidTokenError, ValidationError, ValueError) as exc:
        return f"the decision token is not valid: {type(exc).__name__}"
    if claims.prompt != prompt_id or claims.call != tool_call_id:
        return "the decision token was issued for another call"
    if claims.decision != decision:
        return f"the decision token allows {claims.decision}, not {decision}"
    if by != claims.sub:
        return f"the decision token was issued to {claims.sub!r}, not {by!r}"
    if claims.input_sha256 != input_digest(corrected_input):
        return "the decision token does not match the corrected arguments"
    if now.timestamp() > claims.exp:
        return "the decision token has expired"
    if claims.run is None or claims.run != run_id:
        return "the decision token was issued for another run of this prompt"
    if claims.tool is None or claims.tool != tool:
        return "the decision token was issued for another tool"
    if claims.args_sha256 is None or claims.args_sha256 != json_digest(arguments):
        return "the decision token was issued for other arguments"
    if not claims.nonce:
        return "the decision token has no nonce"
    if claims.nonce in used_nonces:
        return "the decision token was already used (its nonce was seen before)"
    return claims

