"""Files a tool attached can be opened: `GET /prompts/{id}/files/{index}` over real HTTP with API keys
(authorised like the prompt, its media type, always an attachment, HTML never served as a page), and
`dagent file ls/get` with the file's name instead of the store key.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.api import create_app
from durable_agent.api.server import serve_in_background
from durable_agent.plugins.demo import write_report
from tests.support.api import api_config, auth, key_pair
from tests.support.processes import REPO_ROOT
from tests.support.workers import agent_worker

PAGE_NAME = 'x/../ünïcode "page".html'
PAGE = b"<html><body><script>document.title='pwned'</script>hi</body></html>"


class PageInput(BaseModel):
    title: str


@tool("page.write")
async def write_page(args: PageInput, ctx: ToolContext) -> str:
    """Attach an HTML page (a tool's file may be anything: it must never run as the API's page)."""
    ctx.add_file(PAGE_NAME.replace("x", args.title, 1), PAGE.decode(), media_type="text/html",
                 summary="an HTML page")
    return "written"


def _script(request: ModelRequest) -> ModelResponse:
    if results_since_last_user(request):
        return text("I attached your trip report and a page.")
    said = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
    assert said
    return tool_calls(("report.write", {"title": "Paris trip", "body": "Bring an umbrella."}),
                      ("page.write", {"title": "x"}))


async def test_attached_files_download_over_http_as_attachments(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    private_pem, _ = key_pair()
    plugin = Plugin("files", tools=[write_report, write_page])
    async with agent_worker(dev_env, plugins=[plugin], model=ScriptedModel(_script),
                            file_dir=str(tmp_path / "files")) as agent:
        app = create_app(agent, api_config(private_pem))
        async with serve_in_background(app) as url:
            import httpx

            async with httpx.AsyncClient(base_url=url, headers=auth("alice"), timeout=60) as http:
                started = await http.post("/prompts", json={"input": "plan my trip"})
                assert started.status_code == 201, started.text
                prompt_id = started.json()["id"]
                await asyncio.wait_for(agent.prompt(prompt_id).result(), 60)
                record = (await http.get(f"/prompts/{prompt_id}")).json()["prompt"]
                files = {o["name"]: i for i, o in enumerate(record["output"]) if o["type"] == "file"}
                assert set(files) == {"paris-trip.md", PAGE_NAME}, record["output"]

                report = await http.get(f"/prompts/{prompt_id}/files/{files['paris-trip.md']}")
                assert report.status_code == 200, report.text
                assert report.content == b"# Paris trip\n\nBring an umbrella.\n"
                assert report.headers["content-type"].startswith("text/markdown")
                assert report.headers["content-disposition"] == (
                    "attachment; filename=\"paris-trip.md\"; filename*=UTF-8''paris-trip.md")
                assert report.headers["x-content-type-options"] == "nosniff"

                page = await http.get(f"/prompts/{prompt_id}/files/{files[PAGE_NAME]}")
                assert page.status_code == 200 and page.content == PAGE
                assert page.headers["content-disposition"].startswith('attachment; filename="x_..__n_code _page_.html"')
                assert "filename*=UTF-8''x%2F..%2F%C3%BCn%C3%AFcode%20%22page%22.html" in \
                    page.headers["content-disposition"]
                assert page.headers["content-security-policy"] == "sandbox"  # never a page of the API's origin

                not_a_file = await http.get(f"/prompts/{prompt_id}/files/0")  # output 0 is the model's text
                assert not_a_file.status_code == 404 and not_a_file.json()["type"] == "/problems/not-found"
                assert (await http.get(f"/prompts/{prompt_id}/files/999")).status_code == 404
                assert (await http.get(f"/prompts/{prompt_id}/files/-1")).status_code == 422

            async with httpx.AsyncClient(base_url=url, headers=auth("mallory"), timeout=60) as http:
                refused = await http.get(f"/prompts/{prompt_id}/files/{files['paris-trip.md']}")
                assert refused.status_code == 403 and b"Paris" not in refused.content
            async with httpx.AsyncClient(base_url=url, headers=auth("ann"), timeout=60) as http:  # an approver
                assert (await http.get(f"/prompts/{prompt_id}/files/{files['paris-trip.md']}")).status_code == 200
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                assert (await http.get(f"/prompts/{prompt_id}/files/{files['paris-trip.md']}")).status_code == 401
            paths = (await httpx.AsyncClient(base_url=url).get("/openapi.json")).json()["paths"]
            assert "/prompts/{prompt_id}/files/{index}" in paths

        # The CLI: the name, never the store key; `dagent file get` saves it under its name.
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": agent.settings.task_queue, "DAGENT_FILE_DIR": str(tmp_path / "files")}
        env.pop("DAGENT_API_URL", None)

        def dagent(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "durable_agent.cli", *args], env=env, cwd=cwd,
                                  capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

        shown = await asyncio.to_thread(dagent, "show", prompt_id)
        assert "file    paris-trip.md (text/markdown, 33 bytes): Markdown report 'Paris trip'" in shown.stdout
        assert "sha256" not in shown.stdout and "dir:" not in shown.stdout, shown.stdout
        listed = await asyncio.to_thread(dagent, "file", "ls", prompt_id)
        assert f"[{files['paris-trip.md']}] paris-trip.md  text/markdown, 33 bytes" in listed.stdout, listed.stderr
        work = tmp_path / "here"
        work.mkdir()
        saved = await asyncio.to_thread(dagent, "file", "get", prompt_id, "paris-trip.md", cwd=work)
        assert saved.returncode == 0, saved.stderr
        assert (work / "paris-trip.md").read_bytes() == b"# Paris trip\n\nBring an umbrella.\n"
        again = await asyncio.to_thread(dagent, "file", "get", prompt_id, "paris-trip.md", cwd=work)
        assert again.returncode != 0 and "exists (--force overwrites it)" in again.stderr
        page = await asyncio.to_thread(dagent, "file", "get", prompt_id, str(files[PAGE_NAME]), cwd=work)
        assert page.returncode == 0, page.stderr
        assert (work / 'ünïcode "page".html').read_bytes() == PAGE  # only the name's last part, in the directory
        stdout = await asyncio.to_thread(dagent, "file", "get", prompt_id, "nope.txt")
        assert stdout.returncode != 0 and "has no file 'nope.txt'; its files: " in stdout.stderr
