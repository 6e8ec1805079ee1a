"""Checks an AWS Signature Version 4 `Authorization` header the way AWS does: botocore recomputes the
signature over the received method, URL, signed headers and body, with the expected credentials, region
and service, at the request's own `X-Amz-Date`."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTHORIZATION = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<credential>[^,]+), ?SignedHeaders=(?P<signed>[^,]+), ?"
                            r"Signature=(?P<signature>[0-9a-f]{64})$")


@dataclass(frozen=True)
class AWSCredentials:
    access_key: str
    secret_key: str
    session_token: str | None = None
    region: str = "us-east-1"
    service: str = "bedrock"


def sigv4_problem(method: str, url: str, headers: Mapping[str, str], body: bytes,
                  expected: AWSCredentials) -> str | None:
    """Why the request's signature is not valid for `expected`; None when it is."""
    lowered = {name.lower(): value for name, value in headers.items()}
    match = _AUTHORIZATION.match(lowered.get("authorization", ""))
    if match is None:
        return f"no SigV4 Authorization header (got {lowered.get('authorization', '')[:40]!r})"
    access_key, _, scope = match["credential"].partition("/")
    timestamp = lowered.get("x-amz-date", "")
    wanted_scope = f"{timestamp[:8]}/{expected.region}/{expected.service}/aws4_request"
    if access_key != expected.access_key or scope != wanted_scope:
        return f"credential {match['credential']!r} is not {expected.access_key}/{wanted_scope}"
    if lowered.get("x-amz-security-token") != expected.session_token:
        return "the session token is missing or wrong"
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return f"host and x-amz-date must be signed (signed: {signed})"
    request = AWSRequest(method=method, url=url, headers={name: lowered.get(name, "") for name in signed},
                         data=body)
    request.context["timestamp"] = timestamp
    signer = SigV4Auth(Credentials(expected.access_key, expected.secret_key, expected.session_token),
                       expected.service, expected.region)
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(signature, match["signature"]):
        return "the request signature we calculated does not match the signature you provided"
    return None
