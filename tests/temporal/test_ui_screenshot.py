"""The Temporal Web UI, in headless Chromium, on a prompt waiting for approval: the page says what it waits
for and how to approve it, and the signal dialog describes each signal.

A real dev server with its UI, a real worker, and Debian's `chromium` driven through `chromium-driver`
(tests/support/browser.py). The screenshot of the page is kept in .dagent/artifacts/ for a person to look at.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from durable_agent.agent.models import ToolOutput
from durable_agent.cli.devserver import DevServer, free_port
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, connect, create_worker
from tests import scenarios
from tests.support.browser import Browser, browser_available
from tests.support.workers import TEST_SETTINGS

pytestmark = pytest.mark.skipif(not browser_available(), reason="chromium missing: scripts/system-deps installs it")

ARTIFACTS = Path(".dagent/artifacts")


def _rendered_markdown(html: str) -> dict[str, str]:
    """The Markdown of each frame the UI renders (summary, details, current details), by frame id: the UI
    passes it to its renderer in the frame's URL."""
    found = {}
    for tag in re.findall(r"<iframe[^>]*>", html):
        frame_id = re.search(r'id="([^"]+)"', tag)
        src = re.search(r'src="([^"]+)"', tag)
        if frame_id and src:
            query = parse_qs(urlparse(src.group(1).replace("&amp;", "&")).query)
            found[frame_id.group(1)] = query.get("content", [""])[0]
    return found


async def test_waiting_prompt_page_says_what_it_waits_for(tmp_path: Path) -> None:
    async with DevServer(ui_port=free_port(), db_file=tmp_path / "ui.db") as server:
        settings = TEST_SETTINGS.model_copy(update={"temporal_address": server.address,
                                                    "task_queue": f"ui-{uuid.uuid4().hex[:8]}"})
        client = await connect(settings)
        runtime = build_runtime(settings, plugins=[scenarios.plugin], providers={"normal": scenarios.model})
        async with create_worker(client, runtime, task_queue=settings.task_queue):
            handle = await AgentClient(client, settings).start("approval for the supplier invoice", user_id="ann")
            waiting = await handle.wait_until("waiting_for_approval")
            call = waiting.output[0]
            assert isinstance(call, ToolOutput)

            # The UI queries the worker for details and descriptions: the browser runs in a thread.
            page, frames = await asyncio.to_thread(
                _inspect, f"{server.ui_url}/namespaces/default/workflows/{handle.id}")
            # The Send a Signal dialog lists each signal with its description.
            assert "Approve the pending tool call (no reply; a wrong call id is ignored" in page
            assert "Reject the pending tool call; the model sees the reason" in page
            assert "Send the prompt a new user message" in page
            details = frames["user-metadata-current-details"]
            assert details.startswith("**Waiting for approval**: demo.pay {amount: 500} — reason: "
                                      "Paying 500 needs approval.")
            assert f'payload `{{"tool_call_id": "{call.id}", "by": "YOUR-NAME"}}`' in details
            assert "ann: approval for the supplier invoice" in frames.values()  # the summary
            await handle.approve(call.id, by="ann")
            assert (await handle.result()).state == "completed"


def _inspect(url: str) -> tuple[str, dict[str, str]]:
    """The workflow page's HTML and its current details; leaves a screenshot in ARTIFACTS."""
    browser = Browser()
    try:
        browser.open(url)
        first = browser.wait_for_text("User Metadata")
        browser.click_text("User Metadata")
        page = browser.wait_for_text('id="user-metadata-current-details"')
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.screenshot(ARTIFACTS / "ui-waiting-for-approval.png")
        return first + page, _rendered_markdown(page)
    finally:
        browser.close()
