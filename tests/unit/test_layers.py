"""The layers the Architecture drawing shows (README, docs/architecture.md) are the ones the imports follow.

Every product module is imported by its installed name, `durable_agent.<layer>`: a bare `agent`, `api`,
`client`… import would only work from a checkout (and would shadow, or be shadowed by, an application's own
module of that name). `bench/` and `scripts/` use the product as an application would and never import from
`tests/`.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "config", "workflows", "activities", "workers", "client", "api", "cli", "plugins")
# Each package may import itself and the packages listed (plus third-party code); agent/ not even temporalio.
ALLOWED: dict[str, set[str]] = {
    "agent": set(),
    "config": {"agent"},  # what clients and workers both configure: ClientSettings, connection, converter, store
    "plugins": {"agent"},
    "workflows": {"agent"},
    "activities": {"agent", "workflows"},
    "workers": {"agent", "config", "workflows", "activities"},
    "client": {"agent", "config", "workflows"},  # a client runs no activity code and needs no worker's settings
    "api": {"agent", "config", "workflows", "activities", "workers", "client"},
    "cli": {"agent", "config", "workflows", "activities", "workers", "client", "api"},
}
FOLDERS_OF_OURS = (*PACKAGES, "durable_agent", "tests", "bench", "scripts")


@functools.cache  # every file is parsed once, whatever number of rules read it
def _imported_modules(path: Path) -> frozenset[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return frozenset(modules)


def _layers(modules: frozenset[str]) -> set[str]:
    """The product layers among `modules` (`durable_agent.workers.x` -> `workers`), and `temporalio`."""
    layers = set()
    for module in modules:
        parts = module.split(".")
        if parts[0] == "durable_agent" and len(parts) > 1:
            layers.add(parts[1])
        elif parts[0] == "temporalio":
            layers.add("temporalio")
    return layers


def _python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    forbidden = {p for p in PACKAGES if p != package and p not in ALLOWED[package]}
    if package == "agent":
        forbidden.add("temporalio")
    wrong = {str(path.relative_to(ROOT)): sorted(_layers(_imported_modules(path)) & forbidden)
             for path in _python_files(package)}
    assert {path: found for path, found in wrong.items() if found} == {}


@pytest.mark.parametrize("folder", FOLDERS_OF_OURS)
def test_the_product_is_imported_by_its_installed_name(folder: str) -> None:
    bare = {str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path) if m.split(".")[0] in PACKAGES)
            for path in _python_files(folder)}
    assert {path: found for path, found in bare.items() if found} == {}


@pytest.mark.parametrize("folder", ["bench", "scripts", *PACKAGES, "durable_agent"])
def test_nothing_outside_the_tests_imports_from_them(folder: str) -> None:
    wrong = {str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path) if m.split(".")[0] == "tests")
             for path in _python_files(folder)}
    assert {path: found for path, found in wrong.items() if found} == {}


def test_every_product_folder_is_an_installed_package() -> None:
    """A sub-package (`cli/devserver/`, `config/storage/`) is checked by the layer rules above (they walk every
    folder) and is in the wheel only when pyproject.toml lists it: one missing there imports from a checkout but
    not once installed."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {init.parent for package in PACKAGES for init in (ROOT / package).rglob("__init__.py")}
    installed = {"durable_agent." + ".".join(folder.relative_to(ROOT).parts) for folder in folders}
    assert installed - listed == set()
    checked = {str(path.relative_to(ROOT)) for package in PACKAGES for path in _python_files(package)}
    assert {"cli/devserver/process.py", "config/storage/s3.py", "activities/model_round.py"} <= checked


def _module_exists(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "durable_agent" or len(parts) == 1:
        return True
    if len(parts) == 2 and parts[1] not in PACKAGES:  # a module of the front door package itself
        return (ROOT / "durable_agent" / f"{parts[1]}.py").exists()
    path = ROOT.joinpath(*parts[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("folder", FOLDERS_OF_OURS)
def test_every_import_of_ours_names_a_module_that_exists(folder: str) -> None:
    """Also the imports inside functions (the CLI's lazy ones), which nothing else checks before a command runs:
    after a module moves (the dev server from `workers/` to `cli/devserver/`), an old path fails here."""
    missing = {str(path.relative_to(ROOT)): sorted(m for m in _imported_modules(path) if not _module_exists(m))
               for path in _python_files(folder)}
    assert {path: found for path, found in missing.items() if found} == {}


def test_within_the_prompt_package_only_the_host_and_the_conductor_import_temporalio_workflow() -> None:
    """The rooms of workflows/prompt/ act on Temporal through the host (host.py), so their logic, waits and
    activities included, runs on a plain host in a unit test; the conductor (workflow.py) holds the handlers.
    The budget gate is such a room too."""
    rooms = [*_python_files("workflows/prompt"), ROOT / "workflows" / "budget" / "gate.py"]
    importing = {str(path.relative_to(ROOT)) for path in rooms
                 if any(m == "temporalio.workflow" or m.startswith("temporalio.workflow.")
                        for m in _imported_modules(path) | _names_imported_from_temporalio(path))}
    assert importing == {"workflows/prompt/host.py", "workflows/prompt/workflow.py"}
    assert len(rooms) > 10, "the scan found the rooms"


def _names_imported_from_temporalio(path: Path) -> set[str]:
    """`from temporalio import workflow` as `temporalio.workflow`."""
    return {f"temporalio.{alias.name}" for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module == "temporalio" for alias in node.names}


def test_the_conductor_wires_its_rooms_with_no_lambda_and_no_assignment_into_a_room() -> None:
    """No lambda in the conductor's module (its signals name their room's method by attribute path), and
    PromptWorkflow.__init__ hands each room the shared context and the rooms it works with; a closure or an
    attribute set on a room after it is built would hide who depends on whom."""
    tree = ast.parse((ROOT / "workflows" / "prompt" / "workflow.py").read_text(encoding="utf-8"))
    [init] = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "__init__"]
    lambdas = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Lambda)]  # signals' rooms too
    into_rooms = [node.lineno for node in ast.walk(init) if isinstance(node, ast.Assign | ast.AnnAssign)
                  for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                  if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)]
    assert (lambdas, into_rooms) == ([], [])
    assert len(init.body) > 10, "the scan found the conductor's __init__"
