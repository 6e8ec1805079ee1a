"""`POST /slack/interactions`: Slack's Approve / Reject buttons (activities/notify.py posts them) decided through
the same desk as every other door.

Each request must carry Slack's signature of its body under the signing secret and a fresh timestamp
(`slack_sdk.signature.SignatureVerifier`: five minutes); anything else is a 401 and changes nothing. The
clicking Slack user becomes an API principal through `[slack.users]`, or their Slack profile's e-mail against
the API keys' `email` (api/slack_config.py); their roles are that principal's. The decision then goes through
`AgentService.decide`, exactly as `POST /prompts/{id}/approvals/{call}/approve` would for that principal:
visibility, the call's approvers, four-eyes, signed decision tokens. A refusal is shown to that Slack user
only (an ephemeral message through the payload's `response_url`); a decision updates the message for everyone
once the prompt has taken it (the workflow's `decided` step, workflows/prompt/notifications.py).

Slack wants an answer within three seconds, so the route acknowledges at once and decides in the background.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, BackgroundTasks, Request, Response

from durable_agent.agent.extras import require
from durable_agent.agent.logging import get_logger
from durable_agent.api.auth import Principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Config, Service
from durable_agent.api.service import AgentService
from durable_agent.api.slack_config import SlackApiConfig

router = APIRouter(tags=["slack"])
log = get_logger("durable_agent.api.slack")
ACTIONS = {"dagent_approve": "approve", "dagent_reject": "reject"}
DONE = {"approve": "approved", "reject": "rejected"}


def _verified(slack: SlackApiConfig, body: bytes, request: Request) -> bool:
    from slack_sdk.signature import SignatureVerifier

    return SignatureVerifier(slack.signing_secret.get_secret_value()).is_valid(
        body, request.headers.get("x-slack-request-timestamp"), request.headers.get("x-slack-signature"))


async def _slack_email(slack: SlackApiConfig, user_id: str) -> str | None:
    if slack.bot_token is None:
        return None
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(token=slack.bot_token.get_secret_value(), base_url=slack.base_url)
    try:
        found = await client.users_info(user=user_id)
    except SlackApiError as exc:
        log.info("slack users.info refused", error=str(exc.response.get("error")))
        return None
    email = ((found.get("user") or {}).get("profile") or {}).get("email")
    return email if isinstance(email, str) and email else None


async def person(config: ApiConfig, slack: SlackApiConfig, user_id: str) -> Principal | None:
    """The API principal a Slack user decides as, with that principal's roles, or None when nobody maps."""
    principal_id = slack.users.get(user_id)
    if principal_id is None:
        email = await _slack_email(slack, user_id)
        principal_id = next((key.principal for key in config.api_keys
                             if email and key.email and key.email.lower() == email.lower()), None)
    if principal_id is None:
        return None
    return Principal.of(config, principal_id, (role for key in config.api_keys if key.principal == principal_id
                                               for role in key.roles))


async def _tell(slack: SlackApiConfig, response_url: str | None, text: str) -> None:
    """An ephemeral message to the Slack user who clicked (only they see it)."""
    if not response_url:
        return
    from slack_sdk.webhook.async_client import AsyncWebhookClient

    await AsyncWebhookClient(response_url).send(text=text, response_type="ephemeral", replace_original=False)


async def _decide(service: AgentService, config: ApiConfig, slack: SlackApiConfig, payload: dict[str, Any]) -> None:
    user_id = str((payload.get("user") or {}).get("id") or "")
    response_url = payload.get("response_url")
    action = next((a for a in payload.get("actions") or [] if a.get("action_id") in ACTIONS), None)
    if action is None:
        return
    try:
        target = json.loads(action.get("value") or "{}")
        prompt_id, call_id = str(target["prompt"]), str(target["call"])
    except (ValueError, KeyError, TypeError):
        await _tell(slack, response_url, "This button does not name a call.")
        return
    principal = await person(config, slack, user_id)
    if principal is None:
        log.info("slack decision refused: unmapped user", prompt_id=prompt_id, tool_call_id=call_id)
        await _tell(slack, response_url, "You are not known to Durable Agent, so you cannot decide here. "
                                         "Ask an administrator to map your Slack account.")
        return
    kind = ACTIONS[action["action_id"]]
    try:
        await service.decide(principal, prompt_id, call_id, kind)  # type: ignore[arg-type]
    except Problem as problem:
        log.info("slack decision refused", prompt_id=prompt_id, tool_call_id=call_id, by=principal.id,
                 kind=problem.slug)
        await _tell(slack, response_url, f"Not {DONE[kind]}: {problem.detail}")
        return
    log.info("slack decision taken", prompt_id=prompt_id, tool_call_id=call_id, by=principal.id, decision=kind)


@router.post("/slack/interactions", include_in_schema=False)
async def interactions(request: Request, service: Service, config: Config, tasks: BackgroundTasks) -> Response:
    slack = config.slack
    if slack is None:
        raise Problem("not-found", "Slack is not configured on this API ([slack] in api.toml)")
    require("slack", "Slack interactivity")
    body = await request.body()
    if not _verified(slack, body, request):
        raise Problem("unauthenticated", "the Slack signature or timestamp is not valid")
    try:
        payload = json.loads(parse_qs(body.decode()).get("payload", [""])[0])
    except ValueError:
        raise Problem("invalid-request", "no interaction payload") from None
    if payload.get("type") == "block_actions":
        tasks.add_task(_decide, service, config, slack, payload)
    return Response(status_code=200)
