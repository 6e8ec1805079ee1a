"""The version policy's bookkeeping (docs/changing-workflows.md): every patch id the workflows test is a
versioned patch, every patch lists its old side in the legacy fence (workflows/versioning/legacy.py), and the current
version is the newest patch's (1, the 0.1.0 baseline, while there is none).

That old shapes still replay is tests/unit/test_replay.py's job.
"""

from __future__ import annotations

import ast
from pathlib import Path

from durable_agent.workflows.versioning import legacy, versions

WORKFLOWS = Path(versions.__file__).parent


def patch_ids(source: str) -> set[str]:
    """The patch ids a module names: `*_PATCH = "id"` constants and literal `patched("id")`/`has("id", …)` calls."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id.endswith("_PATCH") for t in node.targets)):
            found.add(node.value.value)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in {"patched", "has", "deprecate_patch"}):
            found.add(node.args[0].value)
    return found


def test_the_scan_finds_constants_and_literal_calls() -> None:
    source = 'A_PATCH = "a"\nworkflow.patched("b")\nversions.has("c", 1)\nhas("d", None)\nB = "not-a-patch"\n'
    assert patch_ids(source) == {"a", "b", "c", "d"}


def test_every_patch_id_the_workflows_name_is_a_versioned_patch() -> None:
    found = set().union(*(patch_ids(path.read_text()) for path in WORKFLOWS.rglob("*.py")))
    assert found == set(versions.PATCH_VERSIONS)


def test_every_patch_has_its_old_side_listed_and_nothing_else_is() -> None:
    assert set(legacy.INLINE) == set(versions.PATCH_VERSIONS)
    assert all(legacy.INLINE.values()), "each patch names at least one place"


def test_the_current_version_is_the_newest_patch_or_the_baseline() -> None:
    assert versions.CURRENT_VERSION == max(versions.PATCH_VERSIONS.values(), default=1)
    assert sorted(versions.PATCH_VERSIONS.values()) == list(range(2, versions.CURRENT_VERSION + 1))
