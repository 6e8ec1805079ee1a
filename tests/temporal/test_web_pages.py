"""The inbox and chat pages in headless Chromium (Debian's chromium + chromium-driver, via Selenium),
against the API on a real uvicorn socket, a real worker and the session's dev server."""

from __future__ import annotations

import asyncio

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from durable_agent.workflows.decision_tokens import DecisionClaims, sign_decision
from tests.support.api import USERS, ApiStack, api_stack, key_pair
from tests.support.pages import browser, wait_for


def _open(driver: WebDriver, url: str, user: str) -> None:
    driver.get(f"{url}#key={USERS[user][0]}")


def _open_chat(driver: WebDriver, stack: ApiStack, user: str) -> str:
    _open(driver, f"{stack.url}/chat", user)
    header = wait_for(driver, lambda d: (t := d.find_element(By.ID, "conversation").text).startswith("conversation ")
                      and t, "a conversation")
    return str(header).removeprefix("conversation ")


def _send(driver: WebDriver, text: str) -> None:
    box = driver.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def _first(css: str) -> object:
    """A wait condition: the first element matching `css`, or None."""
    return lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, css)), None)


def _text_of(css: str) -> object:
    """A wait condition: the text of the first element matching `css` (read at once: pages re-render)."""
    return lambda d: next((e.text for e in d.find_elements(By.CSS_SELECTOR, css)), None)


def _card(driver: WebDriver, tool: str) -> WebDriver:
    return wait_for(driver, _first(f'.call[data-tool="{tool}"]'), f"a waiting {tool} call")


async def test_inbox_edit_and_approve_then_chat_shows_the_result(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as inbox, browser() as chat:
                _open(inbox, f"{stack.url}/inbox", "ann")
                wait_for(inbox, lambda d: "Nothing is waiting" in d.find_element(By.ID, "status").text,
                         "an empty inbox")
                _open_chat(chat, stack, "alice")
                _send(chat, "pay bob 250")
                card = _card(inbox, "payment.send")  # appears live, without a reload
                assert "Sending $250 requires approval." in card.text and "asked by alice" in card.text
                amount = card.find_element(By.CSS_SELECTOR, 'input[name="amount"]')
                assert amount.get_attribute("value") == "250"
                amount.clear()
                amount.send_keys("120")
                card.find_element(By.CSS_SELECTOR, "button.approve").click()
                confirmed = wait_for(inbox, _text_of('.call[data-outcome="approved"] .outcome'),
                                     "the approval confirmed")  # the card stays, saying what happened
                assert "Approved by you with amount 250 → 120" in confirmed and "sent: 120, to: bob" in confirmed

                done = wait_for(chat, _text_of('.tool[data-status="done"]'), "the payment done")
                assert '{"sent":120,"to":"bob"}' in done.replace(" ", "") and "approved by ann" in done
                final = wait_for(chat, lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".msg.assistant")
                                                  if e.text.startswith("Done:")], "the final answer")
                assert "payment.send ok" in final[0]
                assert chat.find_elements(By.CSS_SELECTOR, '.widget[data-widget="receipt"]')
                wait_for(chat, lambda d: d.find_element(By.CSS_SELECTOR, "section.prompt").get_attribute("data-state")
                         == "completed", "the prompt completed")
                link = chat.find_element(By.CSS_SELECTOR, "a.temporal-ui").get_attribute("href") or ""
                prompt_id = chat.find_element(By.CSS_SELECTOR, "section.prompt").get_attribute("data-prompt")
                assert link.endswith(f"/workflows/{prompt_id}")

        await asyncio.to_thread(scenario)


async def test_without_the_role_no_approve_button_and_forged_approval_refused(dev_env: WorkflowEnvironment) -> None:
    async with api_stack(dev_env) as stack:
        with browser() as chat, browser() as inbox:
            await asyncio.to_thread(_open_chat, chat, stack, "alice")
            await asyncio.to_thread(_send, chat, "open vault b1")
            await asyncio.to_thread(_open, inbox, f"{stack.url}/inbox", "ann")  # an approver, not in finance
            card = await asyncio.to_thread(_card, inbox, "vault.open")
            assert not card.find_elements(By.CSS_SELECTOR, "button.approve")
            assert "You may not decide this call (approvers: role:finance)" in card.text
            pending = await asyncio.to_thread(wait_for, chat, _text_of('.tool[data-status="waiting for approval"]'),
                                              "the call waiting")
            assert "Waiting for anyone with the finance role." in pending  # alice is not in finance either: no buttons
            assert not chat.find_elements(By.CSS_SELECTOR, ".tool button.approve")

            # Someone with raw Temporal access forges fiona's approval with a key that is not the API's.
            waiting = await stack.agent.list_prompts(user_id="alice")
            prompt_id = next(p.prompt_id for p in waiting)
            handle = stack.agent.prompt(prompt_id)
            call_id = (await handle.pending_approvals())[0].tool_call_id
            forged = sign_decision(DecisionClaims(sub="fiona", roles=["finance"], prompt=prompt_id, call=call_id,
                                                  decision="approve", exp=2_000_000_000), key_pair()[0])
            await handle.approve(call_id, by="fiona", token=forged)
            prompt = await handle.get()
            assert prompt.state == "waiting_for_approval"
            assert any(a.kind == "ignored_approve" and "not valid" in a.detail for a in prompt.audit)

            def fiona_approves() -> None:
                with browser() as finance:
                    _open(finance, f"{stack.url}/inbox", "fiona")
                    card = _card(finance, "vault.open")
                    card.find_element(By.CSS_SELECTOR, "button.approve").click()
                done = wait_for(chat, _text_of('.tool[data-status="done"]'), "the vault opened")
                assert "opened b1" in done and "approved by fiona" in done

            await asyncio.to_thread(fiona_approves)
