"""`[slack]` of api.toml: what `POST /slack/interactions` needs to trust a button click and know who clicked.

    [slack]
    signing_secret = "..."          # or DAGENT_SLACK_SIGNING_SECRET: verifies each request (never logged)
    bot_token = "xoxb-..."          # or DAGENT_SLACK_BOT_TOKEN: users.info, for people matched by e-mail
    base_url = "https://slack.com/api/"
    [slack.users]                   # Slack user id -> the API principal who decides
    U012ABC = "alice"

A Slack user with no entry in `users` is matched by their Slack profile's e-mail against the `email` of the
API keys (`[[api_keys]] email = ...`), when `bot_token` is set; anyone else is refused.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, SecretStr

from durable_agent.agent.strict import StrictModel


class SlackApiConfig(StrictModel):
    model_config = ConfigDict(hide_input_in_errors=True)

    signing_secret: SecretStr
    bot_token: SecretStr | None = None
    base_url: str = "https://slack.com/api/"
    users: dict[str, str] = Field(default_factory=dict, description="Slack user id -> principal id.")
