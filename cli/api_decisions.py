"""Deciding from a terminal where decisions must be signed (`DAGENT_DECISIONS=signed`): through the HTTP API.

A worker with a decision key accepts a decision only with a token signed by the API's private key, and the
API signs one only for the person its key (or JWT) authenticates. So `dagent approve` / `reject` and the
questions of `dagent run` / `chat` send the decision to the API when `DAGENT_API_URL` and `DAGENT_API_KEY`
(your own API key) are set: the API checks who you are and what you may decide, signs, and records you as the
decider (`--by` is then not used). Without them the decision goes straight to Temporal, unsigned, as before;
a deployment that needs signed decisions refuses it, and the refusal says which two variables to set.
Nobody's private key ever sits on a person's machine.
"""

from __future__ import annotations

import json
import os
from typing import Literal
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel, JsonValue, ValidationError

from durable_agent.agent.errors import DecisionRefused
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
            raise DecisionRefused(_problem(status, content))
        try:
            return ToolOutput.model_validate_json(content)
        except ValidationError as exc:
            raise DecisionRefused(f"the API at {self.url} answered {status} without a tool call "
                                  f"(is {API_URL_ENV} a `dagent api`?)") from exc


def _problem(status: int, content: bytes) -> str:
    """The one line of an RFC 9457 problem (`detail`, else `title`), else the status."""
    try:
        problem = json.loads(content)
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        said = problem.get("detail") or problem.get("title")
        if isinstance(said, str) and said:
            return said
    return f"the API answered {status}"


def _explained(exc: DecisionRefused) -> DecisionRefused:
    """A refusal for want of a signed token, with what to set; any other refusal as it is."""
    if "signed decision token is required" in str(exc):
        return DecisionRefused(f"{exc} — {SIGNED_HINT}", exc.kind)
    return exc


async def approve(handle: PromptHandle, tool_call_id: str, *, by: str, input: dict[str, JsonValue] | None = None,
                  roles: list[str] | tuple[str, ...] = ()) -> ToolOutput | None:
    """Approve through the API when it is configured, else straight to Temporal (waiting for the result)."""
    route = ApiRoute.from_env()
    if route is not None:
        return await route.decide(handle.id, tool_call_id, "approve", {"input": input} if input is not None else {})
    try:
        return await handle.approve(tool_call_id, by=by, input=input, wait=True, roles=roles)
    except DecisionRefused as exc:
        raise _explained(exc) from exc


async def reject(handle: PromptHandle, tool_call_id: str, *, by: str, reason: str | None = None,
                 roles: list[str] | tuple[str, ...] = ()) -> ToolOutput | None:
    """Reject through the API when it is configured, else straight to Temporal (waiting for the result)."""
    route = ApiRoute.from_env()
    if route is not None:
        return await route.decide(handle.id, tool_call_id, "reject", {"reason": reason} if reason else {})
    try:
        return await handle.reject(tool_call_id, by=by, reason=reason, wait=True, roles=roles)
    except DecisionRefused as exc:
        raise _explained(exc) from exc
