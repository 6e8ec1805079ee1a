"""Telling approvers, the pure parts: the steps' schedule, redaction, addressees, the directory, the webhook
signature (checked by the `standardwebhooks` package, as a receiver would) and a config that never echoes a
secret."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from durable_agent.activities.notify import webhook_signature
from durable_agent.activities.notify_config import NotifyConfig
from durable_agent.agent.notify import REDACTED, Notify, idempotency_key, redacted, schedule
from durable_agent.workers.notify_config import load_notify_config

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_schedule_reminders_escalation_and_expiry() -> None:
    steps = schedule(86400, 5, 2 * 86400, 3 * 86400)
    assert [(s.name, s.at_seconds) for s in steps] == [("reminder-1", 86400), ("escalated", 172800),
                                                        ("reminder-2", 172800)]
    assert schedule(None, 3, None, None) == []
    assert [s.name for s in schedule(3600, 2, None, None)] == ["reminder-1", "reminder-2"]
    assert schedule(3600, 0, None, None) == []


@given(st.floats(1, 1e6), st.integers(0, 10), st.one_of(st.none(), st.floats(1, 1e6)),
       st.one_of(st.none(), st.floats(1, 1e7)))
def test_schedule_is_ordered_and_before_the_expiry(remind: float, count: int, escalate: float | None,
                                                   expires: float | None) -> None:
    steps = schedule(remind, count, escalate, expires)
    assert [s.at_seconds for s in steps] == sorted(s.at_seconds for s in steps)
    assert all(expires is None or s.at_seconds < expires for s in steps)
    assert len({s.name for s in steps}) == len(steps)  # names are unique within a call: part of the key
    assert sum(s.kind == "reminder" for s in steps) <= count


def test_redaction_of_secret_looking_keys_at_any_depth() -> None:
    value = {"to": "acme", "api_key": "sk", "nested": [{"password": "p", "Authorization": "Bearer x"}],
             "client_secret": "s", "amount": 5, "token_count": 3}
    shown = redacted(value)
    assert shown == {"to": "acme", "api_key": REDACTED, "nested": [{"password": REDACTED, "Authorization": REDACTED}],
                     "client_secret": REDACTED, "amount": 5, "token_count": REDACTED}
    assert "sk" not in json.dumps(shown) and redacted("plain") == "plain"


def test_notify_refuses_bad_addressees_and_delays() -> None:
    with pytest.raises(ValidationError, match="addressees"):
        Notify(channels=["slack"], to=["group:x"])
    with pytest.raises(ValidationError, match="positive"):
        Notify(channels=["email"], remind_after=timedelta(0))
    with pytest.raises(ValidationError):
        Notify(channels=[])
    with pytest.raises(ValidationError):
        Notify(channels=["fax"])  # type: ignore[list-item]


def test_idempotency_key_names_prompt_run_call_step_and_channel() -> None:
    assert idempotency_key("p", "r", "c", "reminder-1", "slack") == "p/r/c/reminder-1/slack"


def test_directory_resolves_users_roles_and_direct_addresses() -> None:
    config = NotifyConfig.model_validate({
        "slack": {"token": "xoxb-1", "channel": "CDEFAULT"},
        "people": {"alice": {"email": "a@x.test", "slack": "UA"}, "bob": {"email": "b@x.test"}},
        "roles": {"finance": ["alice", "bob"]}})
    assert config.emails(["role:finance", "alice", "email:ops@x.test", "slack:#pay", "user:zed"]) == (
        ["a@x.test", "b@x.test", "ops@x.test"], ["user:zed"])
    assert config.slack_targets(["role:finance", "slack:#pay", "email:ops@x.test"]) == (["UA", "#pay"], [])
    assert config.slack_targets(["user:bob"]) == (["CDEFAULT"], ["user:bob"])  # nobody reached: the channel
    assert config.members("role:nobody") == [] and config.members("email:x@y") == []


def test_webhook_signature_verifies_with_standard_webhooks() -> None:
    body = b'{"type":"approval.requested"}'
    import time

    now = int(time.time())
    headers = {"webhook-id": "p/r/c/requested/webhook", "webhook-timestamp": str(now),
               "webhook-signature": webhook_signature(SECRET, "p/r/c/requested/webhook", now, body)}
    assert Webhook(SECRET).verify(body, headers) == {"type": "approval.requested"}
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body + b" ", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body, {**headers, "webhook-id": "another"})


def test_config_file_with_env_secrets_and_written_delays(tmp_path: Path) -> None:
    path = tmp_path / "notify.toml"
    path.write_text('[default]\nchannels = ["webhook"]\nremind_after = "1d"\nescalate_after = "36h"\n'
                    'escalate_to = ["role:cfo"]\n[webhook]\nurl = "http://127.0.0.1:9/hook"\nsecret = "from-file"\n'
                    '[slack]\ntoken = "xoxb-file"\n')
    config = load_notify_config(path, {"DAGENT_WEBHOOK_SECRET": SECRET, "DAGENT_SLACK_BOT_TOKEN": "xoxb-env"})
    assert config.default is not None and config.default.remind_after == timedelta(days=1)
    assert config.default.escalate_after == timedelta(hours=36)
    assert config.webhook is not None and config.webhook.secret.get_secret_value() == SECRET
    assert config.slack is not None and config.slack.token.get_secret_value() == "xoxb-env"
    assert "xoxb-env" not in repr(config) and SECRET not in repr(config)


def test_a_bad_config_names_the_field_never_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "notify.toml"
    path.write_text('[webhook]\nurl = "ftp://nope"\nsecret = "whsec_topsecret"\n[email]\nport = 25\n'
                    'password = "hunter2-password"\n')
    with pytest.raises(ValueError) as raised:
        load_notify_config(path, {})
    message = str(raised.value)
    assert "webhook.url" in message and "email.host" in message
    assert "topsecret" not in message and "hunter2" not in message
    assert load_notify_config(None, {}) == NotifyConfig()


def test_slack_message_shows_values_as_written() -> None:
    from durable_agent.activities.notify import slack_blocks
    from durable_agent.workflows.wire.decisions import PendingApproval
    from durable_agent.workflows.wire.notify import Notice

    notice = Notice(key="k", channel="slack", step="requested", call=PendingApproval(
        prompt_id="p1", run_id="r", user_id="<!channel>", tool_call_id="c1", tool="pay",
        input={"memo": "<!everyone> <https://evil.test|click>"}, reason="Pay & go", approvers=["role:finance"]))
    blocks = slack_blocks(NotifyConfig(), notice)
    head, arguments = blocks[0]["text"], blocks[1]["text"]
    assert "&lt;!channel&gt;" in head["text"] and "<!channel>" not in head["text"] and "Pay &amp; go" in head["text"]
    assert arguments["type"] == "plain_text" and "<!everyone>" in arguments["text"]  # plain text: shown, not parsed
