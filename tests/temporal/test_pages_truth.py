"""The inbox and chat pages never lie (issue 24): what they show is what is true now, every decision is
confirmed or explained, approvers get the context, and /docs works offline. Real headless Chromium (Debian's
chromium + chromedriver, via Selenium) against the API on a real uvicorn socket, a real worker and the
session's Temporal dev server."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
import pytest
from pydantic import BaseModel, Field
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.models import (
    ApprovalRequest,
    Decision,
    Prompt,
    TextOutput,
    ToolOutput,
    ToolSuccess,
    WidgetOutput,
)
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.api import create_app
from durable_agent.api.schemas import ApprovalContext
from durable_agent.api.server import serve_in_background
from durable_agent.api.service import approval_context
from durable_agent.cli.render import describe_prompt
from tests.support.api import USERS, ApiStack, api_config, auth, key_pair
from tests.support.pages import (
    attributes,
    browser,
    console_errors,
    horizontal_overflow,
    screenshot,
    texts,
    wait_for,
    wait_for_text,
)
from tests.support.workers import agent_worker


class Payment(BaseModel):
    to: str = Field(description="Who receives the money")
    amount: float = Field(description="Amount in US dollars")


class Email(BaseModel):
    to: str = Field(description="The recipient's name")
    subject: str


class Rebuild(BaseModel):
    shards: int


def _pay_policy(args: Payment) -> Approval | None:
    return Approval(reason=f"Sending ${args.amount:g} requires approval.") if args.amount > 100 else None


@tool("payment.send", approval=_pay_policy)
async def pay(args: Payment, ctx: ToolContext) -> dict[str, object]:
    """Send money."""
    return {"sent": args.amount, "to": args.to}


@tool("email.send", approval=Approval(reason="Emails go out in your name."))
async def email(args: Email, ctx: ToolContext) -> str:
    """Send an email."""
    return f"emailed {args.to}"


RELEASE = threading.Event()  # the test lets the long tool finish once it has seen its progress


@tool("index.rebuild")
async def rebuild(args: Rebuild, ctx: ToolContext) -> str:
    """Rebuild the search index, reporting progress."""
    half = args.shards // 2
    while not RELEASE.is_set():
        ctx.report_progress(f"indexing shard {half}/{args.shards}", half / args.shards)
        await asyncio.sleep(0.2)
    return f"rebuilt {args.shards} shards"


PLUGIN = Plugin("truth", tools=[pay, email, rebuild])
PAY = re.compile(r"pay (\w+) (\d+)")
MODEL_MESSAGE = "I'll pay both invoices and email ACME."


def _script(request: ModelRequest) -> ModelResponse:
    """`batch` -> three calls needing approval in one response; `pay x N`; `rebuild`; then a summary."""
    last_user = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    results = [m for m in request.messages[last_user:] if isinstance(m, ToolResultMessage)]
    if results:
        return text("Done: " + "; ".join(f"{r.tool} {'failed' if r.is_error else 'ok'}: {r.content}"
                                         for r in results))
    said = request.messages[last_user]
    assert isinstance(said, UserMessage)
    if "batch" in said.text:
        return tool_calls(("payment.send", {"to": "ACME", "amount": 480}),
                          ("payment.send", {"to": "Globex", "amount": 120}),
                          ("email.send", {"to": "ACME", "subject": "Paid"}), text=MODEL_MESSAGE)
    if match := PAY.search(said.text):
        return tool_calls(("payment.send", {"to": match[1], "amount": int(match[2])}), text="Paying now.")
    if "rebuild" in said.text:
        return tool_calls(("index.rebuild", {"shards": 6}))
    return text(f"You said: {said.text}")


@asynccontextmanager
async def truth_stack(env: WorkflowEnvironment) -> AsyncIterator[ApiStack]:
    private_pem, public_pem = key_pair()
    async with agent_worker(env, plugins=[PLUGIN], model=ScriptedModel(_script), decision_key=public_pem) as agent:
        async with serve_in_background(create_app(agent, api_config(private_pem))) as url:
            yield ApiStack(url=url, agent=agent, private_pem=private_pem, public_pem=public_pem)


def _open(driver: WebDriver, url: str, user: str) -> None:
    driver.get(f"{url}#key={USERS[user][0]}")


def _open_chat(driver: WebDriver, url: str, user: str) -> None:
    _open(driver, f"{url}/chat", user)
    wait_for(driver, lambda d: d.find_element(By.ID, "conversation").text.startswith("conversation "),
             "a conversation")


def _send(driver: WebDriver, message: str) -> None:
    box = driver.find_element(By.ID, "input")
    box.send_keys(message)
    box.send_keys(Keys.ENTER)


def _call(driver: WebDriver, tool: str, nth: int = 0):  # type: ignore[no-untyped-def]
    return wait_for(driver, lambda d: (found := d.find_elements(By.CSS_SELECTOR, f'.call[data-tool="{tool}"]'))
                    and len(found) > nth and found[nth], f"waiting call #{nth} of {tool}")


def _settled_chat(driver: WebDriver) -> str:
    """The page once the prompt has completed and its final answer is shown."""
    wait_for(driver, lambda d: attributes(d, "section.prompt", "data-state")[-1:] == ["completed"],
             "the prompt completed")
    return wait_for_text(driver, ".msg.assistant", r"^Done:", "the final answer")


async def _start(stack: ApiStack, user: str, message: str) -> str:
    async with stack.http(user) as http:
        response = await http.post("/prompts", json={"input": message})
        response.raise_for_status()
        return str(response.json()["id"])


async def _wait_pending(stack: ApiStack, prompt_id: str, count: int) -> list[str]:
    handle = stack.agent.prompt(prompt_id)
    for _ in range(600):
        pending = [p.tool_call_id for p in await handle.pending_approvals()]
        if len(pending) == count:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {count} pending calls")


async def test_a_batch_is_one_card_with_context_decided_per_call_and_all_at_once(dev_env: WorkflowEnvironment) -> None:
    """Three calls of one response: one card, in the model's order, with the prompt's text, the model's message
    and the schema's labels; a correction shows its diff; every decision is confirmed; the requester's chat
    shows the correction and who made it."""
    async with truth_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as chat, browser() as inbox:
                _open_chat(chat, stack.url, "alice")
                _send(chat, "batch: pay both invoices and email ACME")
                _open(inbox, f"{stack.url}/inbox", "ann")
                first = _call(inbox, "email.send")  # the last of the three, so all three are listed
                cards = inbox.find_elements(By.CSS_SELECTOR, ".batch")
                assert len(cards) == 1, "one card for the response's three calls"
                card = cards[0]
                assert [c.get_attribute("data-tool") for c in card.find_elements(By.CSS_SELECTOR, ".call")] == [
                    "payment.send", "payment.send", "email.send"]
                assert [i.get_attribute("value") for i in card.find_elements(By.CSS_SELECTOR, 'input[name="to"]')] \
                    == ["ACME", "Globex", "ACME"]
                assert "batch: pay both invoices and email ACME" in card.find_element(By.CSS_SELECTOR,
                                                                                      ".prompt-text").text
                assert MODEL_MESSAGE in card.find_element(By.CSS_SELECTOR, ".model-message").text
                assert "3 calls of one response" in card.text
                assert first.find_element(By.CSS_SELECTOR, "label").text == "To"  # the schema's title
                acme = card.find_elements(By.CSS_SELECTOR, ".call")[0]
                assert "Amount in US dollars" in acme.text and "Who receives the money" in acme.text
                assert "Approve all 3" in card.find_element(By.CSS_SELECTOR, ".approve-all").text
                assert "3 calls waiting" in inbox.find_element(By.ID, "status").text
                screenshot(inbox, "batch-card")

                amount = acme.find_element(By.CSS_SELECTOR, 'input[name="amount"]')
                amount.clear()
                acme.find_element(By.CSS_SELECTOR, "button.approve").click()  # an emptied required number
                said = wait_for_text(inbox, ".call .decision-status", "Amount", "the empty field named")
                assert said == "Amount: enter a number" and "3 calls waiting" in texts(inbox, "#status")[0]
                amount.send_keys("450")
                assert "amount 480 → 450" in acme.find_element(By.CSS_SELECTOR, ".changes").text
                acme.find_element(By.CSS_SELECTOR, "button.approve").click()
                mine = wait_for_text(inbox, '.call[data-outcome="approved"] .outcome', "Approved by you",
                                     "the first decision confirmed")
                assert "with amount 480 → 450" in mine and "runs once the other calls" in mine
                wait_for(inbox, lambda d: "2 calls waiting" in d.find_element(By.ID, "status").text, "the count")
                assert "Approve all 2" in card.find_element(By.CSS_SELECTOR, ".approve-all").text

                card.find_element(By.CSS_SELECTOR, ".approve-all").click()
                wait_for(inbox, lambda d: "Nothing is waiting" in d.find_element(By.ID, "status").text,
                         "nothing left waiting")
                outcomes = wait_for(inbox, lambda d: (found := texts(d, ".call .outcome"))
                                    and all("ran:" in t for t in found) and found, "every call's result")
                assert "sent: 450, to: ACME" in outcomes[0] and "with amount 480 → 450" in outcomes[0]
                assert "sent: 120, to: Globex" in outcomes[1] and "emailed ACME" in outcomes[2]
                assert all("Approved by you" in t for t in outcomes)
                screenshot(inbox, "batch-decided")

                final = _settled_chat(chat)
                assert "payment.send ok" in final and "email.send ok" in final
                cards_text = texts(chat, ".tool")
                assert "amount changed 480 → 450 by ann" in cards_text[0]
                assert all("approved by ann" in t for t in cards_text)
                assert not chat.find_elements(By.CSS_SELECTOR, "button.approve")
                screenshot(chat, "chat-correction")
                assert not console_errors(chat) and not console_errors(inbox)  # no 404, no script refused

        await asyncio.to_thread(scenario)


async def test_two_approvers_race_and_the_loser_is_told_who_won(dev_env: WorkflowEnvironment) -> None:
    """ann approves while fiona rejects the same call at the same moment: one wins, and the other's page says
    it was not applied and who decided; a decision made elsewhere is announced, not silently removed."""
    async with truth_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "pay ACME 480")
        await _wait_pending(stack, prompt_id, 1)

        def race() -> None:
            with browser() as ann, browser() as fiona:
                _open(ann, f"{stack.url}/inbox", "ann")
                _open(fiona, f"{stack.url}/inbox", "fiona")
                buttons = {"ann": _call(ann, "payment.send").find_element(By.CSS_SELECTOR, "button.approve"),
                           "fiona": _call(fiona, "payment.send").find_element(By.CSS_SELECTOR, "button.reject")}
                start = threading.Barrier(2)

                def click(name: str) -> None:
                    start.wait()
                    buttons[name].click()

                clickers = [threading.Thread(target=click, args=(name,)) for name in buttons]
                for clicker in clickers:
                    clicker.start()
                for clicker in clickers:
                    clicker.join()
                pages = {"ann": ann, "fiona": fiona}
                shown = {name: wait_for(page, lambda d: (t := texts(d, ".call .outcome")) and t[0]
                                        and "…" not in t[0] and t[0], f"{name}'s outcome")
                         for name, page in pages.items()}
                winner = next(name for name, said in shown.items() if "by you" in said)
                loser = "fiona" if winner == "ann" else "ann"
                won = "approved" if winner == "ann" else "rejected"
                assert "Not applied" in shown[loser] and f"already {won} by {winner}" in shown[loser], shown
                assert re.search(r"\d+ s ago", shown[loser])
                assert "by you" not in shown[loser]
                screenshot(pages[loser], "race-loser")

        await asyncio.to_thread(race)

        second = await _start(stack, "alice", "pay Globex 300")
        [call_id] = await _wait_pending(stack, second, 1)

        def watched() -> None:
            with browser() as ann:
                _open(ann, f"{stack.url}/inbox", "ann")
                _call(ann, "payment.send")
                wait_for(ann, lambda d: "1 call waiting" in d.find_element(By.ID, "status").text, "one waiting")

                async def root_approves() -> None:
                    async with stack.http("root") as http:
                        url = f"/prompts/{second}/approvals/{call_id}/approve"
                        (await http.post(url, json={"input": {"amount": 250}})).raise_for_status()

                asyncio.run(root_approves())
                said = wait_for_text(ann, ".call .outcome", r"ran:", "who decided, and what ran")
                assert "approved by root" in said and "with amount 300 → 250" in said
                assert "sent: 250, to: Globex" in said
                news = wait_for_text(ann, "#announcements li", "root approved payment.send", "the announcement")
                assert "asked by alice" in news
                assert "Nothing is waiting" in ann.find_element(By.ID, "status").text
                screenshot(ann, "decided-elsewhere")

        await asyncio.to_thread(watched)


async def test_chat_after_a_reload_shows_the_truth_mid_approval_and_after(dev_env: WorkflowEnvironment) -> None:
    """Reloading while the call waits shows it waiting (with its age and live buttons); once it is approved
    elsewhere and has run, every reload shows it done, with no stale buttons."""
    async with truth_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as chat:
                _open_chat(chat, stack.url, "alice")
                _send(chat, "pay ACME 480")
                waiting = wait_for_text(chat, '.tool[data-status="waiting for approval"]', "Approve",
                                        "the call waiting with buttons")
                assert "Sending $480 requires approval." in waiting
                fresh = wait_for_text(chat, ".tool", "Amount in US dollars", "the schema's description (fresh)")
                chat.refresh()
                waiting = wait_for_text(chat, '.tool[data-status="waiting for approval"]', r"· \d+ s",
                                        "still waiting after a reload, with its age")
                assert chat.find_elements(By.CSS_SELECTOR, ".tool button.approve")
                assert texts(chat, ".prompt-head .state") == ["waiting for approval"]
                reloaded = wait_for_text(chat, ".tool", "Amount in US dollars", "the schema's description (reload)")
                labels = ["To", "Who receives the money", "Amount", "Amount in US dollars"]
                for said in (fresh, reloaded):  # the same labels and descriptions on both paths
                    assert all(label in said for label in labels), said
                [prompt_id] = attributes(chat, "section.prompt", "data-prompt")
                [call_id] = attributes(chat, ".tool", "data-call")

                async def ann_approves() -> None:
                    async with httpx.AsyncClient(base_url=stack.url, headers=auth("ann"), timeout=60) as http:
                        (await http.post(f"/prompts/{prompt_id}/approvals/{call_id}/approve")).raise_for_status()

                asyncio.run(ann_approves())
                _settled_chat(chat)
                for reload in range(3):
                    chat.refresh()
                    _settled_chat(chat)
                    tool = wait_for_text(chat, ".tool", "approved by ann", f"the call decided (reload {reload})")
                    assert attributes(chat, ".tool", "data-status") == ["done"], tool
                    assert not chat.find_elements(By.CSS_SELECTOR, "button.approve, button.reject"), tool
                    assert texts(chat, ".prompt-head .state") == ["done"]
                screenshot(chat, "chat-after-reload")

        await asyncio.to_thread(scenario)


async def test_chat_shows_tool_progress_and_fits_a_phone(dev_env: WorkflowEnvironment) -> None:
    """A long tool's progress (what the CLI shows) and elapsed time in the chat, at 390 px without a
    horizontal scroll; the inbox too."""
    RELEASE.clear()
    async with truth_stack(dev_env) as stack:
        def scenario() -> None:
            with browser(390, 844) as chat:
                _open_chat(chat, stack.url, "alice")
                assert chat.execute_script("return window.innerWidth") == 390
                assert horizontal_overflow(chat) <= 0
                _send(chat, "rebuild the index")
                running = wait_for_text(chat, '.tool[data-status="running"]', "indexing shard 3/6 · 50%",
                                        "the tool's progress")
                assert re.search(r"· \d+ s", running)
                assert attributes(chat, ".progress progress", "value") == ["50"]
                assert texts(chat, ".prompt-head .state") == ["working"]
                assert horizontal_overflow(chat) <= 0, "the chat scrolls sideways at 390 px"
                screenshot(chat, "chat-progress-390")
                RELEASE.set()
                final = _settled_chat(chat)
                assert "rebuilt 6 shards" in final
                assert not chat.find_elements(By.CSS_SELECTOR, ".progress")
                _send(chat, "batch: pay both invoices and email ACME")
                wait_for_text(chat, '.tool[data-status="waiting for approval"]', "Approve", "a call waiting")
                assert horizontal_overflow(chat) <= 0, "the waiting call scrolls sideways at 390 px"
                screenshot(chat, "chat-waiting-390")
                with browser(390, 844) as inbox:
                    _open(inbox, f"{stack.url}/inbox", "ann")
                    _call(inbox, "email.send")
                    assert horizontal_overflow(inbox) <= 0, "the inbox scrolls sideways at 390 px"
                    screenshot(inbox, "inbox-390")

        try:
            await asyncio.to_thread(scenario)
        finally:
            RELEASE.set()


async def test_a_rejected_key_shows_the_sign_in_again_and_sign_out_works(dev_env: WorkflowEnvironment) -> None:
    async with truth_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as page:
                for path in ("/inbox", "/chat"):
                    page.get(f"{stack.url}{path}#key=wrong-key-0000000000")
                    said = wait_for_text(page, "#signin", "That key was not accepted", f"{path}: the refusal")
                    assert "Sign in with your API key" in said
                    assert not page.find_element(By.ID, "content").is_displayed()
                    assert page.execute_script("return sessionStorage.getItem('dagent-key')") is None
                    screenshot(page, f"wrong-key-{path.strip('/')}")
                    box = page.find_element(By.CSS_SELECTOR, '#signin input[name="key"]')
                    box.send_keys(USERS["ann"][0])
                    box.send_keys(Keys.ENTER)
                    wait_for(page, lambda d: d.find_element(By.ID, "me").text.startswith("signed in as ann"),
                             f"{path}: signed in")
                    assert page.find_element(By.ID, "content").is_displayed()
                    page.find_element(By.ID, "signout").click()
                    wait_for_text(page, "#signin", "Signed out", f"{path}: signed out")
                    assert page.execute_script("return sessionStorage.getItem('dagent-key')") is None
                    page.refresh()
                    wait_for_text(page, "#signin", "Sign in with your API key", f"{path}: still signed out")

        await asyncio.to_thread(scenario)


async def test_api_docs_render_offline_from_local_files(dev_env: WorkflowEnvironment) -> None:
    async with truth_stack(dev_env) as stack:
        async with stack.http() as http:
            icon = await http.get("/favicon.ico")
            assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
            for path in ("/docs", "/redoc"):
                html = (await http.get(path)).text
                assert "<script>" not in html and "cdn" not in html, f"{path} needs no inline script or CDN"
                others = {"/inbox", "/chat", "/docs"} - {path}
                assert all(f'<a href="{other}">' in html for other in others), f"{path} links back to the pages"

        def scenario() -> None:
            with browser(offline=True) as page:
                with pytest.raises(WebDriverException, match="ERR_NAME_NOT_RESOLVED"):
                    page.get("https://cdn.jsdelivr.net/")  # the network really is off for this browser
                console_errors(page)  # (that failed load's own console line)
                page.get(f"{stack.url}/docs")
                wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"), "the operations")
                body = page.find_element(By.TAG_NAME, "body").text
                assert "Durable Agent API" in body and "/approvals" in body
                hosts = page.execute_script(
                    "return performance.getEntriesByType('resource').map(e => new URL(e.name).host)")
                assert set(hosts) <= {stack.url.removeprefix("http://")}, hosts
                assert not console_errors(page)  # nothing refused by the pages' Content-Security-Policy
                screenshot(page, "docs")
                page.get(f"{stack.url}/redoc")
                wait_for(page, lambda d: "Durable Agent API (1)" in d.find_element(By.TAG_NAME, "body").text,
                         "ReDoc rendered")
                screenshot(page, "redoc")

        await asyncio.to_thread(scenario)


async def test_one_prompts_waiting_calls_come_from_the_prompt_itself(dev_env: WorkflowEnvironment) -> None:
    """GET /prompts/{id}/approvals (what the chat labels its forms from, fresh or reloaded): read from the
    prompt, so the call is listed with its schema as soon as the prompt waits; only those who may see it."""
    async with truth_stack(dev_env) as stack:
        prompt_id = await _start(stack, "alice", "batch: pay and email")
        await _wait_pending(stack, prompt_id, 3)
        async with stack.http("alice") as http:
            items = (await http.get(f"/prompts/{prompt_id}/approvals")).json()
        async with stack.http("mallory") as http:
            refused = await http.get(f"/prompts/{prompt_id}/approvals")
        async with stack.http("ann") as http:
            by_ann = (await http.get(f"/prompts/{prompt_id}/approvals")).json()
            missing = await http.get("/prompts/prompt-nope/approvals")

    assert [item["tool"] for item in items] == ["payment.send", "payment.send", "email.send"]
    schema = items[0]["input_schema"]
    assert schema["properties"]["amount"]["description"] == "Amount in US dollars"
    assert items[2]["input_schema"]["properties"]["to"]["description"] == "The recipient's name"
    assert all(item["prompt_id"] == prompt_id and item["user_id"] == "alice" for item in items)
    assert all(item["can_decide"] for item in items) and all(item["can_decide"] for item in by_ann)
    assert refused.status_code == 403 and "another user" in refused.json()["detail"]
    assert missing.status_code == 404


def test_an_approval_context_names_its_own_response_only() -> None:
    """The model's message is the text of the response that asked for the call, never an earlier round's;
    the batch is that response's calls needing a decision, in record order (pure function, no Temporal)."""
    t1, t2 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC), datetime(2026, 1, 1, 10, 1, tzinfo=UTC)
    pending = ApprovalRequest(reason="needs a person", requested_at=t2)
    prompt = Prompt(id="p", user_id="alice", input="pay and email", output=[
        TextOutput(text="Looking it up."),
        ToolOutput(id="a", tool="lookup", input={}, started_at=t1, result=ToolSuccess(output="ok")),
        WidgetOutput(widget="w", data={}),
        ToolOutput(id="b", tool="payment.send", input={}, started_at=t2, result=pending),
        ToolOutput(id="c", tool="note", input={}, started_at=t2, result=ToolSuccess(output="noted")),
        ToolOutput(id="d", tool="email.send", input={}, started_at=t2, result=pending),
    ])
    silent = approval_context(prompt, prompt, "d", "")
    assert silent == ApprovalContext(prompt_input="pay and email", model_message=None, batch=["b", "d"], position=5)
    prompt.output.insert(3, TextOutput(text="Paying and emailing."))
    said = approval_context(prompt, prompt, "b", "sub/")
    assert said == ApprovalContext(prompt_input="pay and email", model_message="Paying and emailing.",
                                   batch=["sub/b", "sub/d"], position=4)
    assert approval_context(prompt, prompt, "nope", "") is None


async def test_a_decided_call_of_a_waiting_batch_says_what_it_waits_for(dev_env: WorkflowEnvironment) -> None:
    """ann approves the first call of three: the requester's chat shows it decided (no buttons), and that it runs
    once the other 2 decisions are in, and so does `dagent show` (describe_prompt)."""
    async with truth_stack(dev_env) as stack:
        def scenario() -> None:
            with browser() as chat:
                _open_chat(chat, stack.url, "alice")
                _send(chat, "batch: pay both invoices and email ACME")
                wait_for(chat, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".tool button.approve")) == 3,
                         "three calls waiting with buttons")
                [prompt_id] = attributes(chat, "section.prompt", "data-prompt")
                first = attributes(chat, ".tool", "data-call")[0]

                async def ann_approves() -> Prompt:
                    async with httpx.AsyncClient(base_url=stack.url, headers=auth("ann"), timeout=60) as http:
                        url = f"/prompts/{prompt_id}/approvals/{first}/approve"
                        (await http.post(url)).raise_for_status()
                    return await stack.agent.prompt(str(prompt_id)).get()

                record = asyncio.run(ann_approves())
                entry = record.tool_call(str(first))
                assert entry is not None and entry.decision is not None, "the decision is on its call's entry"
                said = wait_for_text(chat, f'.tool[data-call="{first}"]', "runs when the other 2 decisions are in",
                                     "the decided call waiting for the others")
                assert "approved by ann" in said
                assert attributes(chat, f'.tool[data-call="{first}"]', "data-status") == ["approved"]
                assert len(chat.find_elements(By.CSS_SELECTOR, ".tool button.approve")) == 2
                lines = describe_prompt(record)
                assert any(f"[{first}] → approved by ann at" in line and "runs when the other 2 decisions are in"
                           in line for line in lines), lines
                screenshot(chat, "chat-decided-in-batch")

        await asyncio.to_thread(scenario)


def test_show_says_a_decided_call_waits_for_the_rest_of_its_batch() -> None:
    """`dagent show` (describe_prompt, pure): a call with its decision but no result while the prompt waits is
    shown as taken and waiting for the others, never as running or as waiting for a decision of its own."""
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    pending = ApprovalRequest(reason="needs a person", requested_at=at)
    approved = Decision(decision="approved", by="alice", at=at, original_input={"amount": 480})
    prompt = Prompt(id="p", user_id="bob", input="pay", state="waiting_for_approval", output=[
        ToolOutput(id="a", tool="payment.send", input={"amount": 450}, started_at=at, result=pending,
                   decision=approved),
        ToolOutput(id="b", tool="payment.send", input={"amount": 120}, started_at=at, result=None,
                   decision=Decision(decision="rejected", by="carol", at=at, reason="no")),
        ToolOutput(id="c", tool="email.send", input={}, started_at=at, result=pending),
    ])
    a, b, c = describe_prompt(prompt)[2:5]
    assert a == ('tool    payment.send {"amount": 450} [a] → approved by alice at 10:00:00 (amount changed 480 → '
                 "450 by alice); runs when the other 1 decision is in")
    assert b == ('tool    payment.send {"amount": 120} [b] → rejected by carol at 10:00:00: no; the model hears of '
                 "it once the rest of its batch is decided")
    assert c == "tool    email.send {} [c] → waiting for approval: needs a person"
    running = prompt.model_copy(update={"state": "running"})
    assert describe_prompt(running)[3].endswith("→ running  (rejected by carol at 10:00:00)")
