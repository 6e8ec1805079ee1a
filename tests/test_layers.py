"""The layers README's Architecture section draws are the ones the imports follow: no arrow runs upward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "workflows", "activities", "workers", "client", "api", "cli", "plugins")
# Each package may import itself and the packages listed (plus third-party code); agent/ not even temporalio.
ALLOWED: dict[str, set[str]] = {
    "agent": set(),
    "plugins": {"agent"},
    "workflows": {"agent"},
    "activities": {"agent", "workflows"},
    "workers": {"agent", "workflows", "activities"},
    "client": {"agent", "workflows", "activities", "workers"},
    "api": {"agent", "workflows", "activities", "workers", "client"},
    "cli": {"agent", "workflows", "activities", "workers", "client", "api"},
}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    forbidden = {p for p in PACKAGES if p != package and p not in ALLOWED[package]}
    if package == "agent":
        forbidden.add("temporalio")
    wrong = {str(path.relative_to(ROOT)): sorted(_imported_roots(path) & forbidden)
             for path in sorted((ROOT / package).rglob("*.py"))}
    assert {path: found for path, found in wrong.items() if found} == {}
