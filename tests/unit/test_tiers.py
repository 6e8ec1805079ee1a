"""The two test tiers stay apart: tests/unit/ needs no server and runs in seconds (`scripts/test --unit`);
everything that starts Temporal, a worker process, a browser or a container lives in tests/temporal/."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SLOW_MODULES

TESTS = Path(__file__).resolve().parents[1]
SERVER_FIXTURES = {"dev_env", "skip_env"}
# What only the temporal tier may use: servers, worker processes, environments, browsers.
SERVER_IMPORTS = ("durable_agent.cli.devserver", "durable_agent.cli.demo", "temporalio.testing",
                  "tests.support.workers", "tests.support.processes", "tests.support.pages", "tests.support.browser",
                  "tests.crash", "selenium")


def test_every_test_module_is_in_a_tier() -> None:
    modules = {str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")}
    assert modules, "the scan found the tests"
    assert sorted(m for m in modules if Path(m).parts[0] not in ("unit", "temporal")) == []


def _server_use(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [f"{node.name}({a.arg})" for a in node.args.args if a.arg in SERVER_FIXTURES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] if node.module.startswith(SERVER_IMPORTS) else []
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(SERVER_IMPORTS)]
    return found


def test_unit_tests_start_no_server() -> None:
    used = {p.name: _server_use(p) for p in sorted((TESTS / "unit").glob("test_*.py"))}
    assert len(used) > 10, "the scan found the unit tier"
    assert {name: found for name, found in used.items() if found} == {}


def test_the_slow_marker_names_real_temporal_modules() -> None:
    temporal = {p.stem for p in (TESTS / "temporal").glob("test_*.py")}
    assert sorted(SLOW_MODULES - temporal) == []
