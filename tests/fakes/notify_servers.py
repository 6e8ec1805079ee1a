"""Loopback servers the notification channels talk to in tests (no network):

- `WebhookReceiver`: verifies each POST with the `standardwebhooks` library (as a real receiver would) and keeps
  the verified ones, deduplicated by `webhook-id` as the convention asks of receivers;
- `FakeSlack`: the Slack Web API methods the real `slack_sdk` calls for approvals (`chat.postMessage`,
  `chat.update`, `conversations.history`, `conversations.open`, `users.info`), checking the bot token;
- `SmtpSink`: an `aiosmtpd` server that keeps every message it accepts.

Each can `hold` its next request (the request is taken, then the answer waits until `release`), so a test can
SIGKILL the worker in the middle of a send. All run in threads, so worker subprocesses reach them too.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from email import message_from_bytes
from email.message import Message
from typing import Any

from pytest_httpserver import HTTPServer
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from werkzeug import Request, Response

WEBHOOK_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # base64 of 24 test bytes
SLACK_TOKEN = "xoxb-test-token"


class _Hold:
    def __init__(self) -> None:
        self.armed = False
        self.reached = threading.Event()
        self.go = threading.Event()

    def arm(self) -> None:
        self.armed, self.reached, self.go = True, threading.Event(), threading.Event()

    def pause(self) -> None:
        if self.armed:
            self.armed = False
            self.reached.set()
            self.go.wait(60)


class WebhookReceiver:
    def __init__(self, secret: str = WEBHOOK_SECRET) -> None:
        self.server = HTTPServer(host="127.0.0.1", port=0)
        self.webhook = Webhook(secret)
        self.deliveries: list[str] = []  # every verified POST's webhook-id, duplicates included
        self.events: dict[str, dict[str, Any]] = {}  # webhook-id -> payload, each id once
        self.refused = 0
        self.hold = _Hold()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.server.url_for("/hook")

    def __enter__(self) -> WebhookReceiver:
        self.server.start()
        self.server.expect_request("/hook", method="POST").respond_with_handler(self._handle)
        return self

    def __exit__(self, *_: object) -> None:
        self.hold.go.set()
        self.server.clear()
        self.server.stop()

    def _handle(self, request: Request) -> Response:
        try:
            payload = self.webhook.verify(request.get_data(), dict(request.headers))
        except WebhookVerificationError:
            with self._lock:
                self.refused += 1
            return Response("bad signature", status=400)
        message_id = request.headers["webhook-id"]
        with self._lock:
            self.deliveries.append(message_id)
            self.events.setdefault(message_id, payload)
        self.hold.pause()
        return Response(status=204)

    def steps(self) -> list[str]:
        with self._lock:
            return [event["data"]["step"] for event in self.events.values()]


class FakeSlack:
    def __init__(self, token: str = SLACK_TOKEN) -> None:
        self.server = HTTPServer(host="127.0.0.1", port=0)
        self.token = token
        self.messages: list[dict[str, Any]] = []  # posted, each as last updated
        self.updates: list[dict[str, Any]] = []
        self.users: dict[str, dict[str, Any]] = {}  # users.info answers: id -> user
        self.calls: list[str] = []
        self.responses: list[dict[str, Any]] = []  # posted to a response_url (ephemeral answers)
        self.hold = _Hold()
        self._lock = threading.Lock()
        self._ts = itertools.count(1)

    @property
    def base_url(self) -> str:
        return self.server.url_for("/api/")

    def __enter__(self) -> FakeSlack:
        self.server.start()
        self.server.expect_request(re.compile(r"^/api/[\w.]+$")).respond_with_handler(self._handle)
        self.server.expect_request(re.compile(r"^/response/\w+$"), method="POST").respond_with_handler(self._respond)
        return self

    def response_url(self, name: str) -> str:
        """A `response_url` of an interaction: what the app posts there is kept in `responses`."""
        return self.server.url_for(f"/response/{name}")

    def _respond(self, request: Request) -> Response:
        with self._lock:
            self.responses.append(request.get_json())
        return Response("ok", status=200)

    def __exit__(self, *_: object) -> None:
        self.hold.go.set()
        self.server.clear()
        self.server.stop()

    def _handle(self, request: Request) -> Response:
        method = request.path.removeprefix("/api/")
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return _slack({"ok": False, "error": "invalid_auth"})
        args: dict[str, Any] = {**request.args.to_dict(), **request.form.to_dict()}
        if request.is_json:
            args.update(request.get_json())
        with self._lock:
            self.calls.append(method)
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return _slack({"ok": False, "error": "unknown_method"})
        return _slack(handler(args))

    def _chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        metadata = args.get("metadata")
        message = {"channel": args["channel"], "ts": f"{int(time.time())}.{next(self._ts):06d}",
                   "text": args.get("text"), "blocks": args.get("blocks"),
                   "metadata": json.loads(metadata) if isinstance(metadata, str) else metadata}
        with self._lock:
            self.messages.append(message)
        self.hold.pause()  # posted: a worker killed now has sent it
        return {"ok": True, "channel": message["channel"], "ts": message["ts"], "message": message}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            found = next((m for m in self.messages if m["channel"] == args["channel"] and m["ts"] == args["ts"]), None)
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            found.update(text=args.get("text"), blocks=args.get("blocks"))
            self.updates.append(dict(args))
        return {"ok": True, "channel": args["channel"], "ts": args["ts"]}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            found = [m for m in self.messages if m["channel"] == args["channel"]]
        return {"ok": True, "messages": list(reversed(found))[: int(args.get("limit", 100))], "has_more": False}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "channel": {"id": "D" + str(args["users"])}}

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(args.get("user")))
        return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}


def _slack(body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=200, content_type="application/json")


class SmtpSink:
    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        sink = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                sink.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
                sink.messages.append(message_from_bytes(envelope.content))
                return "250 OK"

        with socket.socket() as probe:  # a free port (aiosmtpd's Controller needs one named)
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.controller.stop()
