"""The quick start's webhook receiver: approvals tell it (docs/telling-approvers.md), and it prints each signed
step it verified to the terminal, as a receiver of Standard Webhooks would take them."""

from __future__ import annotations

import base64
import hmac
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from rich.console import Console

from durable_agent.activities.notify import webhook_signature
from durable_agent.activities.notify_config import NotifyConfig, WebhookConfig
from durable_agent.agent.notify import Notify


def _verified(secret: str, request_headers: dict[str, str], body: bytes) -> bool:
    try:
        timestamp = int(request_headers.get("webhook-timestamp", ""))
    except ValueError:
        return False
    expected = webhook_signature(secret, request_headers.get("webhook-id", ""), timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in request_headers.get("webhook-signature", "").split())


@asynccontextmanager
async def demo_webhooks(console: Console) -> AsyncIterator[NotifyConfig]:
    """A receiver on loopback; yields the notification config that makes every approval tell it."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        if not _verified(secret, headers, body):
            console.print("    webhook refused: bad signature")
            return web.Response(status=400)
        event = json.loads(body)
        data = event["data"]
        console.print(f"    webhook {event['type']}: {data['tool']} {data['tool_call_id']} -> "
                      f"{', '.join(data['to']) or 'the approvers'} (signature verified)")
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield NotifyConfig(default=Notify(channels=["webhook"], to=["role:approver"]),
                           webhook=WebhookConfig(url=f"http://127.0.0.1:{port}/hook", secret=secret))  # type: ignore[arg-type]
    finally:
        await runner.cleanup()
