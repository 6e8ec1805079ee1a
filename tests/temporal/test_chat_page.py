"""The chat page in headless Chromium: approvers in words, Cancel, the conversation kept across visits with a
"New conversation" link, and a prompt stopped by its budget reading as stopped, not done."""

from __future__ import annotations

import asyncio
import uuid

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.period_budgets import BudgetLimit
from durable_agent.api.config import ApiKey
from tests.support.api import USERS, api_stack
from tests.support.pages import browser, wait_for


def _conversation(driver: WebDriver) -> str:
    text = wait_for(driver, lambda d: (t := d.find_element(By.ID, "conversation").text).startswith("conversation ")
                    and t, "a conversation")
    return str(text).removeprefix("conversation ")


def _send(driver: WebDriver, text: str) -> None:
    wait_for(driver, lambda d: d.execute_script("return document.activeElement.id") == "input",
             "the page ready for a message")  # focused just before the form's handler is attached
    driver.find_element(By.ID, "input").send_keys(text + "\n")


def _state(driver: WebDriver) -> str:
    prompts = driver.find_elements(By.CSS_SELECTOR, "section.prompt")
    return (prompts[-1].get_attribute("data-state") or "") if prompts else ""


async def test_chat_cancel_approvers_in_words_kept_conversation_and_a_stop(dev_env: WorkflowEnvironment) -> None:
    spender = f"spender-{uuid.uuid4().hex[:8]}"
    key = ApiKey(principal=spender, key=f"{spender}-key-0123456789abcdef", roles=[])
    async with api_stack(dev_env, extra_api_keys=[key]) as stack:
        await stack.agent.set_budget(f"user:{spender}", BudgetLimit(period="day", max_tokens=1))
        try:
            def scenario() -> None:
                with browser() as chat:
                    chat.get(f"{stack.url}/chat#key={USERS['alice'][0]}")
                    first = _conversation(chat)
                    _send(chat, "open vault b1")
                    waiting = wait_for(chat, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".tool")
                                                        if "Waiting for" in e.text], "the vault call waiting")
                    assert "Waiting for anyone with the finance role." in waiting[0], waiting
                    assert "role:finance" not in waiting[0]
                    chat.find_element(By.CSS_SELECTOR, "section.prompt button.cancel").click()
                    wait_for(chat, lambda d: _state(d) == "cancelled", "the prompt cancelled")

                    chat.get(f"{stack.url}/chat")  # a later visit, no conversation in the address
                    assert _conversation(chat) == first
                    wait_for(chat, lambda d: d.find_elements(By.CSS_SELECTOR, "section.prompt"), "its prompts")
                    chat.find_element(By.CSS_SELECTOR, "button.new-conversation").click()
                    wait_for(chat, lambda d: _conversation(d) != first, "a new conversation")
                    assert not chat.find_elements(By.CSS_SELECTOR, "section.prompt")

                with browser() as chat:
                    chat.get(f"{stack.url}/chat#key={key.key}")
                    _conversation(chat)
                    _send(chat, "pay bob 50")
                    wait_for(chat, lambda d: _state(d) == "stopped", "the prompt stopped")
                    head = wait_for(chat, lambda d: next((e.text for e in d.find_elements(
                        By.CSS_SELECTOR, "section.prompt .prompt-head .state")), None), "the header")
                    note = wait_for(chat, lambda d: next((e.text for e in d.find_elements(
                        By.CSS_SELECTOR, ".stop-note")), None), "why it stopped")
                    assert head == "stopped, not finished", head
                    assert note.startswith(f"Stopped: user:{spender} daily budget reached") and "resets at" in note

            await asyncio.to_thread(scenario)
        finally:
            await stack.agent.set_budget(f"user:{spender}", None)


async def test_the_inbox_shows_a_budget_requests_facts_as_facts_and_only_the_grant_editable(
        dev_env: WorkflowEnvironment) -> None:
    from tests.temporal.test_pages_a11y import _axe

    spender = f"asker-{uuid.uuid4().hex[:8]}"
    key = ApiKey(principal=spender, key=f"{spender}-key-0123456789abcdef", roles=[])
    async with api_stack(dev_env, extra_api_keys=[key]) as stack:
        await stack.agent.set_budget(f"user:{spender}", BudgetLimit(period="day", max_tokens=1, on_exhausted="ask",
                                                                    approvers=["user:ann"]))
        try:
            def scenario() -> None:
                with browser() as chat, browser() as inbox:
                    chat.get(f"{stack.url}/chat#key={key.key}")
                    _conversation(chat)
                    _send(chat, "pay bob 50")
                    waiting = wait_for(chat, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".tool")
                                                        if "Waiting for" in e.text], "the request for more")
                    assert "Waiting for ann." in waiting[-1], waiting
                    inbox.get(f"{stack.url}/inbox#key={USERS['ann'][0]}")
                    card = wait_for(inbox, lambda d: next(iter(d.find_elements(
                        By.CSS_SELECTOR, '.call[data-tool="dagent.more_budget"]')), None), "the budget card")
                    facts = {f.get_attribute("data-field"): " ".join(f.text.split())
                             for f in card.find_elements(By.CSS_SELECTOR, ".fact")}
                    assert set(facts) == {"budget", "period", "unit", "allowance", "spent"}, facts
                    assert facts["budget"] == f"Budget: user:{spender}" and facts["period"] == "Period: day"
                    editable = [i.get_attribute("name") for i in card.find_elements(By.CSS_SELECTOR, ".args input")]
                    assert editable == ["asking"], editable
                    assert _axe(inbox) == []
                    card.find_element(By.CSS_SELECTOR, "button.approve").click()
                    wait_for(chat, lambda d: "approved by ann" in " ".join(e.text for e in d.find_elements(
                        By.CSS_SELECTOR, ".tool")), "the grant shown in the chat")
                    granted = wait_for(chat, lambda d: [e.text for e in d.find_elements(
                        By.CSS_SELECTOR, ".tool pre.result") if "granted" in e.text], "the grant's result")
                    assert granted[-1].startswith("granted "), granted  # text as text, not a JSON string in quotes

            await asyncio.to_thread(scenario)
        finally:
            await stack.agent.set_budget(f"user:{spender}", None)


async def test_the_inbox_says_a_call_decided_elsewhere_waits_for_its_batch_not_running(
        dev_env: WorkflowEnvironment) -> None:
    """root approves the second call of a batch of three while ann's inbox shows it: her card says who decided
    and that it runs once every call of the batch is decided — not "running…" (it does not run yet)."""
    from tests.support.pages import wait_for_text
    from tests.temporal.test_pages_truth import _call, _open, _start, _wait_pending, truth_stack

    async with truth_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "batch: pay both invoices and email ACME")
        calls = await _wait_pending(stack, prompt_id, 3)

        def scenario() -> None:
            with browser() as ann:
                _open(ann, f"{stack.url}/inbox", "ann")
                _call(ann, "email.send")

                async def root_approves() -> None:
                    async with stack.http("root") as http:
                        url = f"/prompts/{prompt_id}/approvals/{calls[1]}/approve"
                        (await http.post(url, json={})).raise_for_status()

                asyncio.run(root_approves())
                said = wait_for_text(ann, ".call .outcome", "approved by root", "who decided")
                assert "runs once every call of its batch is decided" in said and "running" not in said, said

        await asyncio.to_thread(scenario)
