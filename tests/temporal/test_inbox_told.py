"""The inbox in headless Chromium shows a step that could not tell anyone of a waiting call, and marks the call a
message's link names (`#prompt=...&call=...`) without deciding anything."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlencode

from selenium.webdriver.common.by import By
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.api import create_app
from durable_agent.api.config import ApiConfig, ApiKey
from durable_agent.api.server import serve_in_background
from tests.fakes.notify_servers import SLACK_TOKEN, FakeSlack
from tests.support.notify import notify_toml, notify_worker, until, wire_plugin
from tests.support.pages import browser, wait_for

FIN = ApiKey(principal="fin", key="fin-key-0123456789abcdef", roles=["finance"])


async def test_inbox_shows_undelivered_steps_and_marks_the_linked_call(dev_env: WorkflowEnvironment,
                                                                  tmp_path: Path) -> None:
    with FakeSlack() as slack:
        # Slack is configured, the webhook is not: its step fails at once (and says why).
        config = notify_toml(tmp_path / "notify.toml", slack_url=slack.base_url, slack_token=SLACK_TOKEN)
        async with notify_worker(dev_env, config, plugins=[wire_plugin(["slack", "webhook"])]) as agent:
            handle = await agent.start("wire 500 to acme", user_id="owner")
            await handle.wait_until("waiting_for_approval")
            record: list[ToolOutput] = []

            async def told() -> bool:
                entry = (await handle.get()).output[0]
                assert isinstance(entry, ToolOutput)
                record[:] = [entry]
                return len(entry.notifications) == 2

            for _ in range(100):
                if await told():
                    break
                await asyncio.sleep(0.1)
            await until(lambda: len(slack.messages) == 1, "the Slack message")
            link = "#" + urlencode({"key": FIN.key, "prompt": handle.id, "call": record[0].id})
            async with serve_in_background(create_app(agent, ApiConfig(api_keys=[FIN]))) as url:

                def scenario() -> tuple[str, str]:
                    with browser() as page:
                        page.get(f"{url}/inbox{link}")
                        card = wait_for(page, lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, ".call.linked")),
                                                             None), "the linked call marked")
                        return card.get_attribute("data-state") or "", card.find_element(
                            By.CSS_SELECTOR, ".undelivered").text

                state, undelivered = await asyncio.to_thread(scenario)
            assert (await handle.get()).state == "waiting_for_approval"  # opening the link decided nothing
    assert state == "waiting"
    assert undelivered == "Not delivered: webhook requested (no [webhook] in the notification config)", undelivered
    assert "slack" not in undelivered  # the Slack step was delivered
