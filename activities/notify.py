"""The `dagent.notify` activity: one step's message about a waiting call on one channel (workflows/
notifications.py schedules the steps). Every attempt of a step carries the same key, and each channel gets the
most of it that it offers:

- webhook: the key is the `webhook-id` (Standard Webhooks), so a receiver that drops ids it has seen gets the
  step once however often a crashed worker's attempt is retried;
- Slack: the key rides in the message's metadata, and a retried attempt first looks for a message carrying it
  (`conversations.history`), so a step posted before a crash is not posted again;
- e-mail: the key is the `Message-ID`; SMTP has no way to ask whether a message was taken, so a crash between
  the server's acceptance and the activity's completion may send the step twice (mail clients thread them as
  one message).

A channel that cannot be reached raises, so Temporal retries it (workflows/prompt/notifications.py NOTIFY_RETRY);
failures are counted in `dagent.approval.notifications{dagent.notify.outcome="failed"}` (agent/metric_names.py) and
logged without secrets or arguments.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from pydantic import JsonValue
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent.activities.heartbeats import bound_log
from durable_agent.activities.notify_config import NotifyConfig
from durable_agent.agent import metric_names
from durable_agent.agent.extras import MissingExtra, require
from durable_agent.agent.identity import describe
from durable_agent.agent.metric_names import APPROVAL_NOTIFICATIONS
from durable_agent.agent.notify import redacted
from durable_agent.workflows.names import NOTIFY_ACTIVITY
from durable_agent.workflows.wire.notify import Notice, NoticeResult

WEBHOOK_TIMEOUT = aiohttp.ClientTimeout(total=10)
MAX_ARGUMENTS_CHARS = 2500  # Slack's section text limit is 3000
APPROVE_ACTION = "dagent_approve"
REJECT_ACTION = "dagent_reject"
METADATA_EVENT = "dagent_approval"
HISTORY_LOOKBACK = 100  # messages of the channel searched for a retried step's earlier post
STEP_TITLES = {"requested": "Approval needed", "escalated": "Approval escalated to you", "decided": "Decided"}


def inbox_link(config: NotifyConfig, notice: Notice) -> str:
    """The call in the inbox page (it never decides on GET: the page asks and the approver clicks)."""
    base = config.inbox_url.rstrip("/")
    return f"{base}/inbox#" + urlencode({"prompt": notice.call.prompt_id, "call": notice.call.tool_call_id})


def title(notice: Notice) -> str:
    if notice.step.startswith("reminder"):
        return f"Reminder {notice.step.removeprefix('reminder-')}: approval still needed"
    return STEP_TITLES.get(notice.step, notice.step)


def arguments_text(notice: Notice) -> str:
    text = json.dumps(redacted(notice.call.input), indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_ARGUMENTS_CHARS else text[:MAX_ARGUMENTS_CHARS] + "\n…"


def expires(notice: Notice) -> str | None:
    """When the call lapses, as ISO 8601 text (None: never)."""
    return notice.call.expires_at.isoformat() if notice.call.expires_at else None


def deciders(notice: Notice) -> str:
    four_eyes = " (not the prompt's own user: four-eyes)" if notice.call.four_eyes else ""
    return describe(notice.call.approvers) + four_eyes


def plain_text(config: NotifyConfig, notice: Notice) -> str:
    lines = [f"{title(notice)}: {notice.call.tool} ({notice.call.tool_call_id}) in prompt {notice.call.prompt_id} of "
             f"{notice.call.user_id}", f"Reason: {notice.call.reason}", f"Who may decide: {deciders(notice)}"]
    if expires(notice):
        lines.append(f"Expires: {expires(notice)}")
    lines += ["Arguments:", arguments_text(notice)]
    if config.inbox_url:
        lines += ["", f"Decide in the inbox: {inbox_link(config, notice)}"]
    return "\n".join(lines)


# --- webhooks (Standard Webhooks) -------------------------------------------------------------------


def webhook_signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of id.timestamp.body>` under the `whsec_` secret (Standard Webhooks)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def webhook_body(config: NotifyConfig, notice: Notice) -> bytes:
    kind = "reminder" if notice.step.startswith("reminder") else notice.step
    call = notice.call
    prefix = f"/prompts/{quote(call.prompt_id, safe='')}/approvals/{quote(call.tool_call_id, safe='/')}"
    data: dict[str, JsonValue] = {
        "step": notice.step, "prompt_id": call.prompt_id, "run_id": call.run_id, "user_id": call.user_id,
        "tool_call_id": call.tool_call_id, "tool": call.tool, "input": redacted(call.input),
        "reason": call.reason, "approvers": call.approvers, "four_eyes": bool(call.four_eyes),
        "to": notice.to, "expires_at": expires(notice), "decision": notice.decision,
        "links": {"inbox": inbox_link(config, notice), "approve": f"{prefix}/approve", "reject": f"{prefix}/reject"}}
    return json.dumps({"type": f"approval.{kind}", "timestamp": datetime.now(UTC).isoformat(), "data": data},
                      separators=(",", ":")).encode()


async def send_webhook(config: NotifyConfig, notice: Notice) -> NoticeResult:
    hook = config.webhook
    assert hook is not None  # `NotifyActivity.notify` checked
    body = webhook_body(config, notice)
    timestamp = int(time.time())
    headers = {"content-type": "application/json", "webhook-id": notice.key, "webhook-timestamp": str(timestamp),
               "webhook-signature": webhook_signature(hook.secret.get_secret_value(), notice.key, timestamp, body)}
    async with aiohttp.ClientSession(timeout=WEBHOOK_TIMEOUT) as session, \
            session.post(hook.url, data=body, headers=headers) as response:
        if response.status >= 300:
            raise RuntimeError(f"webhook answered HTTP {response.status}")
    return NoticeResult(to=notice.to)


# --- e-mail (aiosmtplib) ----------------------------------------------------------------------------


async def send_email(config: NotifyConfig, notice: Notice) -> NoticeResult:
    smtp = config.email
    assert smtp is not None  # `NotifyActivity.notify` checked
    require("email", "e-mail notifications")
    import aiosmtplib

    recipients, unreached = config.emails(notice.to)
    if not recipients:
        return NoticeResult(unreached=unreached)
    message = EmailMessage()
    message["From"] = smtp.sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = f"{title(notice)}: {notice.call.tool} in prompt {notice.call.prompt_id}"
    message["Message-ID"] = f"<{hashlib.sha256(notice.key.encode()).hexdigest()[:32]}@durable-agent>"
    message["X-Dagent-Key"] = notice.key
    message.set_content(plain_text(config, notice))
    await aiosmtplib.send(message, hostname=smtp.host, port=smtp.port, username=smtp.username,
                          password=smtp.password.get_secret_value() if smtp.password else None,
                          start_tls=smtp.starttls and not smtp.use_tls, use_tls=smtp.use_tls, timeout=10)
    return NoticeResult(to=recipients, unreached=unreached)


# --- Slack (slack_sdk) ------------------------------------------------------------------------------


def escaped(text: str) -> str:
    """Text Slack shows as written: no mentions (`<!channel>`), links or user tags smuggled in by a value."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_blocks(config: NotifyConfig, notice: Notice) -> list[dict[str, Any]]:
    """The call, its (redacted) arguments, the reason and who may decide; Approve / Reject / Open in inbox. Every
    value is escaped, and the arguments are plain text: nothing in them can mention or link anyone."""
    value = json.dumps({"prompt": notice.call.prompt_id, "call": notice.call.tool_call_id})
    call = notice.call
    head = (f"*{title(notice)}*: `{escaped(call.tool)}` (`{escaped(call.tool_call_id)}`) in prompt "
            f"`{escaped(call.prompt_id)}` of {escaped(call.user_id)}\n*Reason:* {escaped(call.reason)}\n"
            f"*Who may decide:* {escaped(deciders(notice))}")
    if expires(notice):
        head += f"\n*Expires:* {escaped(expires(notice))}"
    buttons: list[dict[str, Any]] = [
        {"type": "button", "action_id": APPROVE_ACTION, "style": "primary", "value": value,
         "text": {"type": "plain_text", "text": "Approve"}},
        {"type": "button", "action_id": REJECT_ACTION, "style": "danger", "value": value,
         "text": {"type": "plain_text", "text": "Reject"}}]
    if config.inbox_url:
        buttons.append({"type": "button", "action_id": "dagent_open", "url": inbox_link(config, notice),
                        "text": {"type": "plain_text", "text": "Open in inbox"}})
    return [{"type": "section", "text": {"type": "mrkdwn", "text": head}},
            {"type": "section", "text": {"type": "plain_text", "text": arguments_text(notice)}},
            {"type": "actions", "block_id": "dagent_decide", "elements": buttons}]


def decided_blocks(notice: Notice) -> tuple[str, list[dict[str, Any]]]:
    decision = notice.decision if isinstance(notice.decision, dict) else {}
    outcome, by, at = decision.get("decision"), decision.get("by"), decision.get("at")
    text = escaped(f"{notice.call.tool} ({notice.call.tool_call_id}) in prompt {notice.call.prompt_id}: {outcome}" + (
        f" by {by}" if by else "") + (f" at {at}" if at else ""))
    return text, [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{str(outcome).capitalize()}*: {text}"}}]


async def _posted_before(client: Any, channel: str, key: str) -> str | None:
    """The `ts` of a message this step already posted in `channel` (an attempt that crashed after posting)."""
    history = await client.conversations_history(channel=channel, limit=HISTORY_LOOKBACK, include_all_metadata=True)
    for message in history.get("messages", []):
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        if payload.get("key") == key:
            return str(message["ts"])
    return None


async def send_slack(config: NotifyConfig, notice: Notice) -> NoticeResult:
    require("slack", "Slack notifications")
    from slack_sdk.web.async_client import AsyncWebClient

    assert config.slack is not None  # `NotifyActivity.notify` checked
    client = AsyncWebClient(token=config.slack.token.get_secret_value(), base_url=config.slack.base_url)
    if notice.step == "decided":
        text, blocks = decided_blocks(notice)
        for ref in notice.refs:
            channel, _, ts = ref.rpartition(":")
            await client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
        return NoticeResult(to=[ref.rpartition(":")[0] for ref in notice.refs], refs=notice.refs)
    targets, unreached = config.slack_targets(notice.to)
    refs: list[str] = []
    text, blocks = escaped(plain_text(config, notice)), slack_blocks(config, notice)
    for target in targets:
        channel = target
        if target.startswith(("U", "W")) and not target.startswith("#"):  # a person: their direct messages
            channel = (await client.conversations_open(users=target))["channel"]["id"]
        key = f"{notice.key}/{target}"
        ts = await _posted_before(client, channel, key) if activity.info().attempt > 1 else None
        if ts is None:
            posted = await client.chat_postMessage(
                channel=channel, text=text, blocks=blocks,
                metadata={"event_type": METADATA_EVENT, "event_payload": {"key": key}})
            channel, ts = str(posted["channel"]), str(posted["ts"])
        refs.append(f"{channel}:{ts}")
    return NoticeResult(to=targets, unreached=unreached, refs=refs)


SENDERS = {"webhook": send_webhook, "email": send_email, "slack": send_slack}


def outcome(notice: Notice, result: str) -> dict[str, metric_names.AttributeValue]:
    return metric_names.attributes({"dagent.notify.channel": notice.channel, "dagent.notify.outcome": result})


class NotifyActivity:
    def __init__(self, config: NotifyConfig) -> None:
        self.config = config

    @activity.defn(name=NOTIFY_ACTIVITY)
    async def notify(self, notice: Notice) -> NoticeResult:
        logger = bound_log(prompt_id=notice.call.prompt_id, tool_call_id=notice.call.tool_call_id, step=notice.step,
                           channel=notice.channel)
        counter = activity.metric_meter().create_counter(
            metric_names.name_of(APPROVAL_NOTIFICATIONS), APPROVAL_NOTIFICATIONS.description,
            APPROVAL_NOTIFICATIONS.unit)
        try:
            if getattr(self.config, notice.channel) is None:
                raise ApplicationError(f"no [{notice.channel}] in the notification config", non_retryable=True)
            result = await SENDERS[notice.channel](self.config, notice)
        except MissingExtra as exc:  # retrying cannot install it
            counter.add(1, outcome(notice, "failed"))
            raise ApplicationError(str(exc), non_retryable=True) from None
        except Exception as exc:
            counter.add(1, outcome(notice, "failed"))
            logger.warning("notification not delivered", error=type(exc).__name__, detail=str(exc)[:200])
            raise
        counter.add(1, outcome(notice, "sent"))
        logger.info("notification sent", to=len(result.to), unreached=len(result.unreached))
        return result
