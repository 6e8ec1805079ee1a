"""How a worker reaches approvers (docs/telling-approvers.md): the channels' endpoints and secrets, the
directory that turns `user:`/`role:` addressees into e-mail addresses and Slack users, and the deployment's
default `Notify` for approvals that declare none.

Read from the TOML file `DAGENT_NOTIFY_CONFIG` (`Settings.notify_config`, loaded by workers/notify_config.py); the
secrets may come from the environment instead (DAGENT_SLACK_BOT_TOKEN, DAGENT_SMTP_PASSWORD, DAGENT_WEBHOOK_SECRET).
Secrets are `SecretStr`: never in a repr, a log line or an error.

    inbox_url = "https://agent.example.com"   # links in messages point at the call in the inbox
    [default]                                 # every approval that declares no `notify`
    channels = ["slack", "email"]
    to = ["role:finance"]
    remind_after = "1d"
    escalate_after = "2d"
    escalate_to = ["role:cfo"]
    [webhook]
    url = "https://hooks.example.com/approvals"
    secret = "whsec_..."                      # Standard Webhooks signing secret
    [email]
    host = "smtp.example.com"
    port = 587
    sender = "agent@example.com"
    username = "agent"
    password = "..."
    starttls = true
    [slack]
    token = "xoxb-..."
    channel = "#approvals"                    # where messages go when no addressee has a Slack id
    [people.alice]
    email = "alice@example.com"
    slack = "U012ABC"
    [roles]
    finance = ["alice", "bob"]
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, SecretStr

from durable_agent.agent.identity import parse_approver
from durable_agent.agent.notify import Notify
from durable_agent.agent.strict import StrictModel


class _Model(StrictModel):
    model_config = ConfigDict(hide_input_in_errors=True)  # errors never echo a secret


class WebhookConfig(_Model):
    url: str = Field(pattern=r"^https?://")
    secret: SecretStr = Field(description="Standard Webhooks secret: `whsec_` and base64.")


class EmailConfig(_Model):
    host: str
    port: int = 587
    sender: str
    username: str | None = None
    password: SecretStr | None = None
    starttls: bool = True
    use_tls: bool = False


class SlackConfig(_Model):
    token: SecretStr
    base_url: str = "https://slack.com/api/"
    channel: str | None = None


class Person(_Model):
    email: str | None = None
    slack: str | None = None


class NotifyConfig(_Model):
    inbox_url: str = ""
    default: Notify | None = None
    webhook: WebhookConfig | None = None
    email: EmailConfig | None = None
    slack: SlackConfig | None = None
    people: dict[str, Person] = Field(default_factory=dict)
    roles: dict[str, list[str]] = Field(default_factory=dict)

    def members(self, entry: str) -> list[str]:
        """The user ids an addressee names (`role:x` through `roles`; `email:`/`slack:` name nobody here)."""
        if entry.startswith(("email:", "slack:")):
            return []
        approver = parse_approver(entry)
        return list(self.roles.get(approver.name, [])) if approver.kind == "role" else [approver.name]

    def emails(self, to: list[str]) -> tuple[list[str], list[str]]:
        """The addresses `to` reaches by e-mail, and the addressees it cannot reach."""
        return self._reached(to, "email")

    def slack_targets(self, to: list[str]) -> tuple[list[str], list[str]]:
        """The Slack channels and users `to` reaches, and the addressees it cannot reach; with none reached,
        the configured channel."""
        found, unreached = self._reached(to, "slack")
        if not found and self.slack is not None and self.slack.channel:
            found.append(self.slack.channel)
        return found, unreached

    def _reached(self, to: list[str], channel: Literal["email", "slack"]) -> tuple[list[str], list[str]]:
        """What `to` names on `channel` (its own `email:`/`slack:` entries, and people's ids), and the addressees
        it cannot reach there; entries addressed to the other channel are left out."""
        found: list[str] = []
        unreached: list[str] = []
        for entry in to:
            if entry.startswith(("email:", "slack:")) and not entry.startswith(f"{channel}:"):
                continue
            targets = [entry.removeprefix(f"{channel}:")] if entry.startswith(f"{channel}:") else [
                getattr(person, channel) for user in self.members(entry)
                if (person := self.people.get(user)) is not None and getattr(person, channel)]
            found += [t for t in targets if t not in found]
            if not targets:
                unreached.append(entry)
        return found, unreached
