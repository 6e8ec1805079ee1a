"""The legacy fence (workflows/legacy.py) lists the old side of every patch, and only real patches.

A new patch without its entry fails here, so the next drain (the rule in workflows/versions.py) finds every
branch it deletes in one place. That the old shapes still replay is tests/test_replay.py's job.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from durable_agent.workflows import legacy, versions

WORKFLOWS = Path(versions.__file__).parent


def test_every_patch_has_its_old_side_listed_and_nothing_else_is() -> None:
    assert set(legacy.INLINE) == set(versions.PATCH_VERSIONS)
    assert all(legacy.INLINE.values()), "each patch names at least one place"


def test_every_patch_id_the_workflows_test_is_a_versioned_patch() -> None:
    """Every string a workflow module binds to a `*_PATCH` constant is in PATCH_VERSIONS (so in the fence)."""
    found: set[str] = set()
    for path in WORKFLOWS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Name) and t.id.endswith("_PATCH") for t in node.targets)):
                found.add(node.value.value)
    assert found, "the scan found the patch constants"
    assert found == set(versions.PATCH_VERSIONS)


def test_inline_entries_name_methods_that_exist() -> None:
    """An entry that points at `<module>.py <Class>.<method>` in workflows/ names a method the class still has."""
    checked = 0
    for places in legacy.INLINE.values():
        for place in places:
            found = re.match(r"(\w+)\.py (\w+)\.(\w+)", place)
            if found is None:
                continue
            module = importlib.import_module(f"durable_agent.workflows.{found.group(1)}")
            assert hasattr(getattr(module, found.group(2)), found.group(3)), place
            checked += 1
    assert checked >= 8, "the entries name their places as `<module>.py <Class>.<method>`"
