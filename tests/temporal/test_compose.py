"""docker-compose.yml, Dockerfile and deploy/: offline checks (no Docker engine on this machine).

The compose file is linted with docker-compose v1 from PyPI (`scripts/compose-lint`, which creates
`.venv-compose`). Without that venv these tests skip locally, but fail when the CI env var is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from durable_agent.cli.devserver import DYNAMIC_CONFIG, SEARCH_ATTRIBUTES, DevServer
from durable_agent.cli.devserver.binaries import temporal_cli_path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
LINT_SCRIPT = ROOT / "scripts" / "compose-lint"
COMPOSE_BIN = ROOT / ".venv-compose" / "bin" / "docker-compose"
COMPOSE_PYTHON = ROOT / ".venv-compose" / "bin" / "python"
API_KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _require_compose() -> None:
    if COMPOSE_BIN.exists():
        return
    msg = f"{COMPOSE_BIN.relative_to(ROOT)} is missing: run scripts/compose-lint once to create it"
    if "CI" in os.environ:
        pytest.fail(f"{msg} (CI is set, so this is an error, not a skip)")
    pytest.skip(msg)


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    _require_compose()
    env = {k: v for k, v in os.environ.items() if k not in API_KEY_VARS}
    return subprocess.run(
        [str(LINT_SCRIPT), str(path)], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def _resolved_config() -> dict[str, Any]:
    """`docker-compose config` output (interpolated, merged) as a dict, with API keys unset on the host."""
    _require_compose()
    env = {k: v for k, v in os.environ.items() if k not in API_KEY_VARS}
    out = subprocess.run(
        [str(COMPOSE_BIN), "-f", str(COMPOSE_FILE), "config"],
        capture_output=True, text=True, timeout=120, env=env, check=True, cwd=ROOT,
    ).stdout
    as_json = subprocess.run(
        [str(COMPOSE_PYTHON), "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
        input=out, capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    return dict(json.loads(as_json))


# --- the linter --------------------------------------------------------------------------------------


def test_compose_file_passes_lint() -> None:
    result = _lint(COMPOSE_FILE)
    assert result.returncode == 0, result.stderr


def test_lint_rejects_undefined_dependency(tmp_path: Path) -> None:
    """A control copy passes and the broken one fails, so the lint is not accepting everything."""
    text = COMPOSE_FILE.read_text()
    control = tmp_path / "ok" / "docker-compose.yml"
    control.parent.mkdir()
    control.write_text(text)
    assert _lint(control).returncode == 0

    marker = "    depends_on:\n      temporal:\n        condition: service_healthy\n      temporal-setup:"
    assert marker in text, "worker's depends_on block changed; update this test"
    broken = tmp_path / "bad" / "docker-compose.yml"
    broken.parent.mkdir()
    broken.write_text(text.replace(marker, marker.replace(
        "    depends_on:\n", "    depends_on:\n      nosuchservice:\n        condition: service_started\n", 1
    ), 1))
    result = _lint(broken)
    assert result.returncode != 0
    assert "nosuchservice" in result.stderr and "undefined" in result.stderr, result.stderr


def test_lint_rejects_schema_error(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace(
        "    restart: unless-stopped\n", "    restart_policy: always\n", 1
    ))
    result = _lint(broken)
    assert result.returncode != 0
    assert "restart_policy" in result.stderr, result.stderr


# --- the stack's shape -------------------------------------------------------------------------------


def test_stack_shape() -> None:
    services: dict[str, Any] = _resolved_config()["services"]
    assert {"postgresql", "temporal", "temporal-ui", "worker", "temporal-setup"} <= set(services)

    pg = services["postgresql"]
    assert "healthcheck" in pg and any("/var/lib/postgresql/data" in str(v) for v in pg["volumes"])

    temporal = services["temporal"]
    assert temporal["image"].startswith(("temporalio/server:", "temporalio/auto-setup:"))
    assert temporal["environment"]["DB"] == "postgres12"
    assert "healthcheck" in temporal
    assert temporal["depends_on"]["postgresql"]["condition"] == "service_healthy"
    dyn_path = temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    mount = next(v for v in temporal["volumes"] if "dynamicconfig" in str(v))
    host_dir = Path(str(mount).split(":")[0])
    assert (host_dir / Path(dyn_path).name).is_file() and host_dir.is_relative_to(ROOT / "deploy")

    ui = services["temporal-ui"]
    assert ui["image"].startswith("temporalio/ui:")
    assert any(str(p).rstrip("/tcp").endswith(":8080") for p in ui["ports"])

    worker = services["worker"]
    assert worker["build"]["dockerfile"] == "Dockerfile"
    assert worker["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert worker["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully"
    env = worker["environment"]
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    for var in (*API_KEY_VARS, "DAGENT_MODEL_NORMAL", "DAGENT_MODEL_HIGH", "DAGENT_PLUGINS"):
        assert var in env, var
        assert env[var] is None, f"{var} must be passed through from the host, got {env[var]!r}"
    for var in ("TEMPORAL_NAMESPACE", "DAGENT_TASK_QUEUE"):
        assert var in env
    # secured Temporal and encryption keys: passed through from the host, never set here
    for var in ("TEMPORAL_API_KEY", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH",
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "DAGENT_CODEC_KEYS"):
        assert var in env and env[var] is None, var


def test_stack_keeps_no_machine_local_state() -> None:
    """Workers scale and are re-created freely: no worker volume, no fixed name or host port, every
    payload and file in the shared MinIO bucket (created, with its lifecycle rule, by minio-setup)."""
    services: dict[str, Any] = _resolved_config()["services"]
    worker = services["worker"]
    assert not worker.get("volumes") and "container_name" not in worker and not worker.get("ports")
    env = worker["environment"]
    assert env["DAGENT_STORE"] == "s3://dagent" and env["DAGENT_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert worker["depends_on"]["minio-setup"]["condition"] == "service_completed_successfully"
    minio = services["minio"]
    assert minio["image"].startswith("minio/minio:") and "healthcheck" in minio
    assert any("/data" in str(v) for v in minio["volumes"])
    assert env["AWS_ACCESS_KEY_ID"] == minio["environment"]["MINIO_ROOT_USER"]
    setup = services["minio-setup"]
    assert setup["depends_on"]["minio"]["condition"] == "service_healthy"
    script = (ROOT / "deploy" / "minio-setup.sh").read_text()
    assert 'mc mb --ignore-existing "store/$DAGENT_BUCKET"' in script and "mc ilm rule add" in script
    codec = services["codec-server"]
    assert codec["command"][:1] == ["codec-server"] and codec["environment"]["DAGENT_CODEC_KEYS"] is None
    assert codec["environment"]["DAGENT_CODEC_CORS_ORIGINS"] == "http://localhost:8080"
    assert services["temporal-ui"]["environment"]["TEMPORAL_CODEC_ENDPOINT"] == "http://localhost:8081"
    named = {str(v).split(":")[0] for svc in services.values() for v in svc.get("volumes", [])
             if not str(v).startswith(("/", "."))}
    assert named <= {"postgres-data", "minio-data"}, named


def test_no_secrets_in_deploy_files() -> None:
    files = [COMPOSE_FILE, ROOT / "Dockerfile", *sorted((ROOT / "deploy").rglob("*"))]
    for path in files:
        if path.is_file():
            # comments may show usage (`export OPENAI_API_KEY=...`); values may not appear in config
            text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#"))
            assert not re.search(r"sk-[A-Za-z0-9_-]{10,}|sk-ant-", text), path
            for var in API_KEY_VARS:
                assignments = (text + "\n").replace(f"{var}:\n", "")  # bare `VAR:` = pass-through
                assert not re.search(rf"{var}\s*[:=]\s*\S", assignments), (path, var)


def test_deploy_config_matches_dev_server() -> None:
    dynamic = (ROOT / "deploy" / "dynamicconfig" / "production-sql.yaml").read_text()
    for key, value in DYNAMIC_CONFIG.items():
        assert re.search(rf"^{re.escape(key)}:\n\s*- value: {re.escape(value)}$", dynamic, re.M), key
    setup = (ROOT / "deploy" / "temporal-setup.sh").read_text()
    default_attrs = re.search(r'SEARCH_ATTRIBUTES="\$\{SEARCH_ATTRIBUTES:-([^}]*)\}"', setup)
    assert default_attrs is not None
    assert default_attrs.group(1).split() == [f"{n}={t}" for n, t in SEARCH_ATTRIBUTES.items()]


def test_dockerfile_and_dockerignore() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    # the extras the image's services use (worker, api, codec server), never the embedded dev server
    assert 'pip install --constraint scripts/constraints.txt ".[api,mcp,otel,s3,gcs,bedrock]"' in dockerfile
    assert "!scripts/constraints.txt" in (ROOT / ".dockerignore").read_text().splitlines()  # in the build context
    assert 'ENTRYPOINT ["dagent"]' in dockerfile and 'CMD ["worker"]' in dockerfile
    # every source folder pyproject maps into the durable_agent namespace is in the (allow-list) build context
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert package_dir, "pyproject maps no source folders"
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore, ".dockerignore is expected to be an allow-list"
    for folder in package_dir.values():
        assert f"!{folder}/" in ignore, f".dockerignore does not let {folder}/ into the build context"
    assert "!pyproject.toml" in ignore and "!README.md" in ignore


# --- the one-shot setup script against a real dev server ---------------------------------------------


def test_temporal_setup_script_creates_namespace_and_search_attributes(tmp_path: Path) -> None:
    """deploy/temporal-setup.sh (run by the compose `temporal-setup` service) with the pip-installed CLI."""
    sh = shutil.which("sh") or "/bin/sh"
    script = ROOT / "deploy" / "temporal-setup.sh"
    with DevServer(log_file=tmp_path / "server.log") as server:
        env = {
            **os.environ,
            "TEMPORAL_CLI": temporal_cli_path(),
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_NAMESPACE": "compose-setup-test",
            "SETTLE_SECONDS": "0",
        }
        for _ in range(2):  # idempotent
            run = subprocess.run([sh, str(script)], env=env, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stdout + run.stderr
        listed = subprocess.run(
            [temporal_cli_path(), "operator", "search-attribute", "list", "--address", server.address,
             "--namespace", "compose-setup-test", "--output", "json"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
        custom = json.loads(listed)["customAttributes"]
        assert custom == {name: "INDEXED_VALUE_TYPE_KEYWORD" for name in SEARCH_ATTRIBUTES}

        conflict = subprocess.run(
            [sh, str(script)], env={**env, "SEARCH_ATTRIBUTES": "UserId=Int"},
            capture_output=True, text=True, timeout=120,
        )
        assert conflict.returncode != 0
        server.kill()  # throwaway server: skip the 1.5-3 s graceful shutdown


def test_api_service() -> None:
    """`dagent api` runs as its own service from the same image, with its config mounted and keys passed through."""
    services: dict[str, Any] = _resolved_config()["services"]
    api = services["api"]
    assert api["image"] == services["worker"]["image"]
    assert api["command"][:1] == ["api"] and "0.0.0.0" in api["command"]
    assert any(str(p).rstrip("/tcp").endswith(":8000") for p in api["ports"])
    assert api["depends_on"]["temporal"]["condition"] == "service_healthy"
    env = api["environment"]
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233" and env["DAGENT_API_CONFIG"] == "/etc/dagent/api.toml"
    assert env["DAGENT_DECISION_PRIVATE_KEY"] is None, "the signing key must come from the host, not the file"
    assert services["worker"]["environment"]["DAGENT_DECISION_PUBLIC_KEY"] is None
    mount = next(v for v in api["volumes"] if "/etc/dagent" in str(v))
    assert (Path(str(mount).split(":")[0]) / "api.toml").is_file()
