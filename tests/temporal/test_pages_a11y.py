"""The inbox and chat in headless Chromium, checked with axe-core (vendored: tests/support/vendor) while a
call waits and after it was decided: no serious or critical violation (WCAG 2.2 AA rules, target size
included); each call's buttons have their own accessible name; a heading names the page; arrivals and
decisions are announced in a live region. And `/docs` can authorise: the OpenAPI has a bearer scheme.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from tests.support.api import USERS, api_stack
from tests.support.pages import browser, wait_for

AXE = (Path(__file__).parents[1] / "support" / "vendor" / "axe.min.js").read_text()
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


def _axe(driver: WebDriver) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now (one line each, for the message)."""
    driver.execute_script(AXE)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"axe.run(document, {{runOnly: {{type: 'tag', values: {json.dumps(TAGS)}}}}})"
        ".then((r) => done(JSON.stringify(r.violations))).catch((e) => done(JSON.stringify({error: String(e)})));")
    violations = json.loads(result)
    assert isinstance(violations, list), violations
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5],
             "help": v["help"]} for v in violations if v["impact"] in ("serious", "critical")]


async def test_inbox_and_chat_pass_axe_with_named_buttons_headings_and_a_live_region(
        dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        async with httpx.AsyncClient(base_url=stack.url) as http:
            spec = (await http.get("/openapi.json")).json()
        assert spec["components"]["securitySchemes"]["bearer"] == {
            "type": "http", "scheme": "bearer", "description": spec["components"]["securitySchemes"]["bearer"][
                "description"]}
        assert {"bearer": []} in spec["security"]

        def scenario() -> None:
            with browser() as inbox, browser() as chat:
                chat.get(f"{stack.url}/chat#key={USERS['alice'][0]}")
                wait_for(chat, lambda d: d.find_element(By.ID, "conversation").text.startswith("conversation "),
                         "a conversation")
                box = chat.find_element(By.ID, "input")
                box.send_keys("pay bob 250\n")
                wait_for(chat, lambda d: d.find_elements(By.CSS_SELECTOR, '.tool button.approve'), "approve in chat")
                inbox.get(f"{stack.url}/inbox#key={USERS['ann'][0]}")
                wait_for(inbox, lambda d: d.find_elements(By.CSS_SELECTOR, '.call[data-tool="payment.send"]'),
                         "the waiting call")

                for page, driver in (("inbox", inbox), ("chat", chat)):
                    assert driver.find_element(By.TAG_NAME, "h1").text, page
                    names = [b.accessible_name for b in driver.find_elements(By.CSS_SELECTOR, "button.approve")
                             if b.is_displayed()]
                    assert names and all(n.startswith("Approve") and "payment.send" in n for n in names), names
                    assert _axe(driver) == [], (page, _axe(driver))

                live = chat.find_element(By.CSS_SELECTOR, "#live[aria-live]")
                inbox.find_element(By.CSS_SELECTOR, ".call button.approve").click()
                wait_for(chat, lambda d: "approved by ann" in (d.find_element(By.ID, "live").get_attribute(
                    "textContent") or ""),
                         "the decision announced in the chat's live region")
                assert live.get_attribute("aria-live") == "polite"
                wait_for(chat, lambda d: d.find_element(By.CSS_SELECTOR, "section.prompt").get_attribute(
                    "data-state") == "completed", "the prompt done")
                for page, driver in (("inbox", inbox), ("chat", chat)):
                    assert _axe(driver) == [], (page, _axe(driver))

        await asyncio.to_thread(scenario)
