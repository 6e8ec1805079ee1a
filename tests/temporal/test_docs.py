"""The documentation: a README that is a front page, a MkDocs site that builds with --strict and without the
network, and reference pages that cannot drift from the code they describe.

docs/configuration.md's settings table and docs/cli.md are written by scripts/gen_docs.py from `Settings`
and from the `dagent` Typer app; when a field or an option changes, these tests fail until the pages are
regenerated (`.venv/bin/python scripts/gen_docs.py`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
import typer
from pydantic import Field
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.cli.devserver import free_port
from durable_agent.workers.settings import Settings
from tests.support.workers import agent_worker

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LAYERS = ("agent", "workflows", "activities", "workers", "plugins", "client", "cli", "api")
LAYER = "(?:" + "|".join(LAYERS) + ")"
MKDOCS_ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}

# `mkdocs build` in a process whose sockets refuse to connect: the build must need no network at all.
_OFFLINE_MKDOCS = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("the docs build tried to use the network")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", *sys.argv[1:]]
cli()
"""


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _OFFLINE_MKDOCS, "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)], cwd=config.parent, env=MKDOCS_ENV,
                          capture_output=True, text=True, timeout=170, check=False)


# --- generated reference pages ----------------------------------------------------------------------


def test_the_configuration_page_is_the_settings_model() -> None:
    gen = _gen_docs()
    committed = gen.CONFIGURATION_PAGE.read_text(encoding="utf-8")
    assert gen.configuration_page(committed) == committed, (
        "docs/configuration.md differs from Settings: run .venv/bin/python scripts/gen_docs.py")
    for name, field in Settings.model_fields.items():  # every field is in the table, with its default
        assert f"| `{name}` |" in committed, name
        variable = re.match(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+", field.description or "")
        if variable:
            assert f"`{variable.group(0)}`" in committed, name


def test_the_code_map_lists_every_module() -> None:
    gen = _gen_docs()
    committed = gen.CODE_MAP_PAGE.read_text(encoding="utf-8")
    assert gen.code_map_page(committed) == committed, (
        "docs/code-map.md differs from the modules: run .venv/bin/python scripts/gen_docs.py")
    modules = [path for folder in gen.PRODUCT for path in (ROOT / folder).rglob("*.py") if path.name != "__init__.py"]
    assert len(modules) > 150, "the scan found the product"
    assert [str(m) for m in modules if f"`{m.relative_to(ROOT).as_posix()}`" not in committed] == []


def test_a_changed_setting_is_drift() -> None:
    gen = _gen_docs()

    class Grown(Settings):
        retry_budget: int = Field(default=7, description="DAGENT_RETRY_BUDGET (worker): retries per day.")

    table = gen.settings_table(Grown)
    assert table != gen.settings_table()
    assert "| `DAGENT_RETRY_BUDGET` | `retry_budget` | `7` | (worker) retries per day. |" in table

    class Undocumented(Settings):
        secret_knob: int = 3

    with pytest.raises(ValueError, match="secret_knob has no description"):
        gen.settings_table(Undocumented)


def test_the_cli_reference_is_the_typer_app() -> None:
    gen = _gen_docs()
    committed = gen.CLI_PAGE.read_text(encoding="utf-8")
    assert gen._cli_page_as_documented() == committed, (
        "docs/cli.md differs from cli/app.py: run .venv/bin/python scripts/gen_docs.py")
    from durable_agent.cli.app import app

    command = typer.main.get_command(app)
    names = command.list_commands(typer.Context(command))  # type: ignore[attr-defined]  (lazy: not .commands)
    assert {"worker", "pending", "store", "deploy", "schedule"} <= set(names)
    for name in names:
        assert f"### `dagent {name}`" in committed, name
    assert "[default: $USER]" in committed  # never the name of whoever regenerated it


def test_a_changed_command_is_drift() -> None:
    gen = _gen_docs()
    from durable_agent.cli.app import app

    grown = typer.Typer()
    grown.registered_commands = list(app.registered_commands)
    grown.registered_groups = list(app.registered_groups)
    grown.registered_callback = app.registered_callback
    grown.info = app.info

    @grown.command("tidy")
    def tidy(days: int = typer.Option(30, help="Older than this many days")) -> None:
        """Tidy up <old> things."""

    page = gen.cli_page(grown)
    assert page != gen.cli_page(app)
    assert "### `dagent tidy`" in page and "Older than this many days" in page
    assert "Tidy up &lt;old&gt; things." in page  # prose is escaped, or the site would eat it as a tag


def test_gen_docs_check_reports_a_stale_page(tmp_path: Path) -> None:
    """`scripts/gen_docs.py --check` on the committed pages passes (what CI would run by hand)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


# --- the site ---------------------------------------------------------------------------------------


def test_the_site_builds_strict_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = _build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    nav_pages = re.findall(r":\s*([\w-]+)\.md\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(nav_pages) >= 15
    for page in nav_pages:
        built = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert built.exists(), page
    html = "\n".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html
    assert not re.findall(r'<(?:script|link)[^>]*(?:src|href)="https?://', html), "the site loads nothing remote"
    assert "Issue 17 and the current figures" in (site / "bench-results" / "index.html").read_text()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "RESULTS.md", tmp_path / "bench" / "RESULTS.md")
    page = tmp_path / "docs" / "approvals.md"
    page.write_text(page.read_text() + "\nSee [the rules](tools-and-plugins.md#no-such-section).\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stdout + done.stderr


def test_scripts_docs_serves_the_site() -> None:
    port = free_port()
    proc = subprocess.Popen([str(ROOT / "scripts" / "docs"), "--dev-addr", f"127.0.0.1:{port}"], cwd=ROOT,
                            env=MKDOCS_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline, page = time.monotonic() + 120, ""
        while time.monotonic() < deadline and not page:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/approvals/", timeout=5) as response:
                    page = response.read().decode()
            except OSError:
                time.sleep(0.5)
        assert "Approving from the Temporal UI" in page
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


# --- the README and the code in every page ----------------------------------------------------------


def _slugs(markdown: str) -> set[str]:
    from markdown.extensions.toc import slugify

    text = re.sub(r"(?ms)^```.*?^```", "", markdown)
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"(?m)^#{1,6} (.+?)\s*$", text)}


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    first_block = re.search(r"(?ms)^```\w*\n(.*?)^```", text)
    assert first_block and text.index("```") < 400, "the two commands come first"
    for script in ("quickstart", "test"):
        assert f"./scripts/{script}" in first_block.group(1)
        assert os.access(ROOT / "scripts" / script, os.X_OK)
    assert "from durable_agent import" in text
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 10
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor:
            assert anchor in _slugs(target.read_text(encoding="utf-8")), f"README links to {link}: no such heading"
    for page in re.findall(r":\s*([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M):
        if page not in ("index.md", "bench-results.md"):
            assert f"docs/{page}" in text, f"the README does not link to docs/{page}"


async def test_the_readme_example_runs(dev_env: WorkflowEnvironment) -> None:
    """The README's "agent in twenty lines", exactly as printed: its plugin on a real worker, its `pay` on a
    real client; the scripted model asks for a $480 payment, then answers."""
    block = next(b for b in re.findall(r"(?ms)^```python\n(.*?)^```", README.read_text(encoding="utf-8"))
                 if "async def pay" in b)
    example = ModuleType("readme_example")
    exec(compile(block, "README.md", "exec"), example.__dict__)
    model = ScriptedModel([tool_calls(("payment.send", {"to": "ACME", "amount": 480})), text("Paid ACME.")])
    async with agent_worker(dev_env, plugins=[example.plugin], model=model) as client:
        prompt = await example.pay(client)
    assert prompt.state == "completed", prompt.error
    (call,) = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert call.tool == "payment.send" and call.decision and call.decision.by == "alice"
    assert isinstance(call.result, ToolSuccess) and call.result.output["paid"] == 480
    run_id = (await dev_env.client.get_workflow_handle(prompt.id).describe()).run_id
    assert call.result.output["key"] == f"{prompt.id}/{run_id}/{call.id}"  # the idempotency key, as documented:
    for page in ("tools-and-plugins.md", "approvals-policy.md"):
        documented = " ".join((DOCS / page).read_text(encoding="utf-8").split())
        assert re.search(r"`<workflow id>/<run id>/<(tool )?call id>`", documented), page
    assert len(model.requests) == 2 and "Paid ACME." in str(prompt.output[-1])


def _code(markdown: str) -> list[str]:
    """Fenced blocks and inline code spans."""
    fence = r"(?ms)^\s*```[^\n]*\n(.*?)^\s*```"
    prose = re.sub(fence, "", markdown)
    return re.findall(fence, markdown) + [span for _, span in re.findall(r"(``?)(.+?)\1", prose)]


def _bare_module_paths(code: str) -> list[str]:
    """`workers.plugin.X`, `plugins.demo:plugin`, `from agent.models import`: a layer named without
    `durable_agent.` in front, where the name after it is one of that layer's modules."""
    found = []
    for match in re.finditer(rf"(?<![\w./-])({LAYER})\.(\w+)", code):
        layer, name = match.groups()
        if (ROOT / layer / f"{name}.py").exists() or (ROOT / layer / name / "__init__.py").exists():
            found.append(match.group(0))
    found += re.findall(rf"(?m)^\s*(?:from|import)\s+{LAYER}\b.*", code)
    found += re.findall(rf"-m\s+{LAYER}\b", code)
    return found


@pytest.mark.parametrize("page", [README, ROOT / "bench" / "RESULTS.md", *sorted(DOCS.rglob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_code_names_the_installed_package(page: Path) -> None:
    bare = [hit for code in _code(page.read_text(encoding="utf-8")) for hit in _bare_module_paths(code)]
    assert not bare, f"{page.name}: use durable_agent.<layer> names, not {bare}"


def test_the_bare_name_check_catches_them() -> None:
    assert _bare_module_paths("from agent.models import Prompt") == ["agent.models", "from agent.models import Prompt"]
    assert _bare_module_paths("DAGENT_PLUGINS=plugins.demo:plugin") == ["plugins.demo"]
    assert _bare_module_paths("python -m cli run") == ["-m cli"]
    assert _bare_module_paths("durable_agent.workers.plugin.DurableAgentPlugin, workers/plugin.py, "
                              "client.start(...), mypkg.plugins:payments") == []


def test_front_door_imports_name_exported_things() -> None:
    """`from durable_agent import …` in the README and the docs imports only what `durable_agent.__all__` has."""
    import durable_agent

    pages = [README, *sorted(DOCS.rglob("*.md"))]
    imports = [(page.name, names) for page in pages
               for names in re.findall(r"from durable_agent import ([\w, ]+)", page.read_text(encoding="utf-8"))]
    assert len(imports) >= 8
    for page, names in imports:
        unknown = [n.strip() for n in names.split(",") if n.strip() and n.strip() not in durable_agent.__all__]
        assert not unknown, f"{page} imports {unknown} from durable_agent, which does not export them"


def test_the_readme_and_the_architecture_page_draw_the_same_layers() -> None:
    def drawing(page: Path) -> str:
        match = re.search(r"(?ms)^```text\n(.*?)^```", page.read_text(encoding="utf-8"))
        assert match, page
        return match.group(1)

    assert drawing(README) == drawing(DOCS / "architecture.md")
    for layer in LAYERS:
        assert f"durable_agent.{layer}" in drawing(README), layer
    from durable_agent.workflows import names

    wire = {value for key, value in vars(names).items() if key.endswith(("_ACTIVITY", "_WORKFLOW"))}
    assert len(wire) >= 11, "the scan found every activity and workflow type"
    assert sorted(name for name in wire if name not in drawing(README)) == []  # every one drawn


def _public_functions() -> set[str]:
    """Module-level functions of the product that are not also some class's method (`start_conversation` is both
    a route and `AgentClient.start_conversation`: a page calling it means the method)."""
    top, methods = set(), set()
    for folder in ("agent", "workflows", "activities", "workers", "client", "api", "cli", "plugins", "durable_agent"):
        for path in (ROOT / folder).rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            top |= set(re.findall(r"(?m)^(?:async )?def ([a-z]\w*)\(", source))
            methods |= set(re.findall(r"(?m)^[ \t]+(?:async )?def ([a-z]\w*)\(", source))
    return top - methods


def _names_without_import_path(text: str, public: set[str], front_door: Sequence[str]) -> list[str]:
    called = {name for code in _code(text) for name in re.findall(r"(?<![\w.])([a-z]\w*)\(", code)} & public
    shown = [name for name in called if re.search(rf"def {name}\b|\.{name}\(", text)  # the page's own, a method
             or re.search(rf"import[^\n]*\b{name}\b|import \([^)]*\b{name}\b|durable_agent(\.\w+)*\.{name}\b", text)
             or (name in front_door and "from durable_agent import" in text)]
    return sorted(set(called) - set(shown))


def test_every_function_a_page_calls_has_its_import_path_on_the_page() -> None:
    """A reader can import every function a page shows (`prompt_priority` once had no import path anywhere)."""
    import durable_agent

    public = _public_functions()
    assert {"prompt_priority", "create_worker", "queue_rate"} <= public
    assert _names_without_import_path("`prompt_priority(\"a\")`", public, durable_agent.__all__) == ["prompt_priority"]
    missing = {page.name: names for page in [README, *sorted(DOCS.rglob("*.md"))]
               if (names := _names_without_import_path(page.read_text(encoding="utf-8"), public,
                                                       durable_agent.__all__))}
    assert missing == {}
