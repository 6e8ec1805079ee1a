"""Deciding from a terminal where decisions must be signed (`DAGENT_DECISIONS=signed`): through the HTTP API.

A worker with a decision key accepts a decision only with a token signed by the API's private key, and the
API signs one only for the person its key (or JWT) authenticates. So `dagent approve` / `reject` and the
questions of `dagent run` / `chat` send the decision to the API when `DAGENT_API_URL` and `DAGENT_API_KEY`
(your own API key) are set: the API checks who you are and what you may decide, signs, and records you as the
decider. `--by` (or `run` / `chat`'s `--user`) is then not used: given and naming someone else than the key's
person, it is warned about in one line, and the decision is still taken as the key's person. Without them the
decision goes straight to Temporal, unsigned, as before; a deployment that needs signed decisions refuses it,
and the refusal says which two variables to set. Nobody's private key ever sits on a person's machine.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Literal
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel, JsonValue, ValidationError

from durable_agent.agent.errors import REFUSAL_KINDS, DecisionRefused, RefusalKind
from durable_agent.agent.models import ToolOutput
from durable_agent.client import PromptHandle

API_URL_ENV = "DAGENT_API_URL"
API_KEY_ENV = "DAGENT_API_KEY"
DECISION_SECONDS = 300.0  # the API answers once the approved call has run (or waits for its batch)
SIGNED_HINT = (f"this deployment takes only signed decisions: set {API_URL_ENV} (the `dagent api` address) and "
               f"{API_KEY_ENV} (your API key) so `dagent` decides through the API, or decide in the inbox")


class ApiRoute(BaseModel):
    """Where and as whom decisions go when they go through the HTTP API."""

    url: str
    key: str

    @classmethod
    def from_env(cls) -> ApiRoute | None:
        url, key = os.environ.get(API_URL_ENV, "").strip(), os.environ.get(API_KEY_ENV, "").strip()
        if not url and not key:
            return None
        if not (url and key):
            missing = API_KEY_ENV if url else API_URL_ENV
            raise ValueError(f"{missing} is not set: deciding through the API needs both {API_URL_ENV} and "
                             f"{API_KEY_ENV}")
        return cls(url=url.rstrip("/"), key=key)

    async def decide(self, prompt_id: str, tool_call_id: str, kind: Literal["approve", "reject"],
                     body: dict[str, JsonValue]) -> ToolOutput:
        path = f"/prompts/{quote(prompt_id, safe='')}/approvals/{quote(tool_call_id, safe='/')}/{kind}"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DECISION_SECONDS),
                                             headers={"Authorization": f"Bearer {self.key}"}) as http:
                async with http.post(self.url + path, json=body) as response:
                    status, content = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise DecisionRefused(f"no answer from the API at {self.url} ({API_URL_ENV}): "
                                  f"{type(exc).__name__}: {exc}") from exc
        if status == 401:
            raise DecisionRefused(f"the API at {self.url} did not accept {API_KEY_ENV}")
        if status >= 400:
            raise DecisionRefused(*_problem(status, content))
        try:
            return ToolOutput.model_validate_json(content)
        except ValidationError as exc:
            raise DecisionRefused(f"the API at {self.url} answered {status} without a tool call "
                                  f"(is {API_URL_ENV} a `dagent api`?)") from exc


    async def principal(self) -> str | None:
        """The person the key authenticates (`GET /me`), once per process; None if the API does not say."""
        if self.url not in _PRINCIPALS:
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ME_SECONDS),
                                                 headers={"Authorization": f"Bearer {self.key}"}) as http:
                    async with http.get(self.url + "/me") as response:
                        found = (await response.json()).get("id") if response.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
                found = None
            _PRINCIPALS[self.url] = found if isinstance(found, str) else None
        return _PRINCIPALS[self.url]


ME_SECONDS = 10.0
_PRINCIPALS: dict[str, str | None] = {}  # API address -> the key's person (one key per process: the env's)
_WARNED: set[str] = set()
Warn = Callable[[str], None]


def _to_stderr(text: str) -> None:
    sys.stderr.write(f"warning: {text}\n")
    sys.stderr.flush()


def _given_decider(argv: list[str] | None = None) -> tuple[str, str] | None:
    """(`--by`, its value) or (`--user`, …) when the person typed it on the command line, not the default:
    only a name someone gave is worth a warning when the API records another."""
    args = sys.argv[1:] if argv is None else argv
    for option in ("--by", "--user"):
        for i, arg in enumerate(args):
            if arg == "--":
                break
            if arg == option and i + 1 < len(args):
                return option, args[i + 1]
            if arg.startswith(option + "="):
                return option, arg.split("=", 1)[1]
    return None


async def _warn_if_not_used(route: ApiRoute, by: str, warn: Warn) -> None:
    """`--by bob` with a key that authenticates ann: say once that the decision is recorded as ann."""
    given = _given_decider()
    if given is None or given[1] in _WARNED:
        return
    principal = await route.principal()
    if principal is None or principal in (by, given[1]):
        return
    _WARNED.add(given[1])
    warn(f"{given[0]} {given[1]} is not used: decisions through {API_URL_ENV} ({route.url}) are recorded as "
         f"{principal}, the person {API_KEY_ENV} authenticates")


def _problem(status: int, content: bytes) -> tuple[str, RefusalKind]:
    """The one line of an RFC 9457 problem (`detail`, else `title`), else the status; with its kind (the
    problem type's last part: `already-decided`, `not-allowed`, …)."""
    try:
        problem = json.loads(content)
    except ValueError:
        problem = None
    said, kind = f"the API answered {status}", "decision-refused"
    if isinstance(problem, dict):
        text = problem.get("detail") or problem.get("title")
        said = text if isinstance(text, str) and text else said
        slug = str(problem.get("type") or "").rsplit("/", 1)[-1]
        kind = slug if slug in REFUSAL_KINDS else kind
    return said, kind  # type: ignore[return-value]


def _explained(exc: DecisionRefused) -> DecisionRefused:
    """A refusal for want of a signed token, with what to set; any other refusal as it is."""
    if "signed decision token is required" in str(exc):
        return DecisionRefused(f"{exc} — {SIGNED_HINT}", exc.kind)
    return exc


async def approve(handle: PromptHandle, tool_call_id: str, *, by: str, input: dict[str, JsonValue] | None = None,
                  roles: list[str] | tuple[str, ...] = (), warn: Warn = _to_stderr) -> ToolOutput | None:
    """Approve through the API when it is configured, else straight to Temporal (waiting for the result)."""
    route = ApiRoute.from_env()
    if route is not None:
        await _warn_if_not_used(route, by, warn)
        return await route.decide(handle.id, tool_call_id, "approve", {"input": input} if input is not None else {})
    try:
        return await handle.approve(tool_call_id, by=by, input=input, wait=True, roles=roles)
    except DecisionRefused as exc:
        raise _explained(exc) from exc


async def reject(handle: PromptHandle, tool_call_id: str, *, by: str, reason: str | None = None,
                 roles: list[str] | tuple[str, ...] = (), warn: Warn = _to_stderr) -> ToolOutput | None:
    """Reject through the API when it is configured, else straight to Temporal (waiting for the result)."""
    route = ApiRoute.from_env()
    if route is not None:
        await _warn_if_not_used(route, by, warn)
        return await route.decide(handle.id, tool_call_id, "reject", {"reason": reason} if reason else {})
    try:
        return await handle.reject(tool_call_id, by=by, reason=reason, wait=True, roles=roles)
    except DecisionRefused as exc:
        raise _explained(exc) from exc
