"""Every repository path a comment, docstring or doc names exists: a module that moves or goes takes the
references to it along (a docstring once named a `period_budgets` module in workflows/ that never existed).
Dated benchmark logs (bench/RESULTS*.md) keep the paths of their day."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("agent", "workflows", "activities", "workers", "plugins", "client", "cli", "api", "tests", "docs", "bench",
       "scripts", "deploy", "durable_agent")
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(TOP) + r")/[\w./-]*\w\.(?:py|md|sh|toml|json|ya?ml|html|js|css|txt))"
                  r"(?![\w/])")
GENERATED = ("bench/results/",)  # written by a bench run, not kept in the repository
SUFFIXES = {".py", ".md", ".sh", ".toml", ".yml", ".yaml"}


def named_paths(text: str) -> list[str]:
    """The repository paths `text` names (placeholders and globs left out)."""
    return [m.group(1) for m in PATH.finditer(text) if not {"*", "<"} & set(m.group(1))]


def _exists(path: str) -> bool:
    installed = path.removeprefix("durable_agent/")  # the installed package maps each folder under durable_agent/
    return path.startswith(GENERATED) or (ROOT / path).exists() or (ROOT / installed).exists()


def _sources() -> list[Path]:
    return [p for p in ROOT.rglob("*") if p.suffix in SUFFIXES and p.is_file()
            and not any(part.startswith(".") or part == "node_modules" for part in p.relative_to(ROOT).parts)
            and not p.name.startswith("RESULTS")]


def test_the_scan_finds_paths_in_prose_and_code() -> None:
    gone = "workflows/" + "period_budgets.py"  # split, so this file names no missing path itself
    text = f"see workflows/prompt/workflow.py, `docs/index.md` and ({gone}); not foo/workflows/a.py or docs/<page>.md"
    assert named_paths(text) == ["workflows/prompt/workflow.py", "docs/index.md", gone]
    assert not _exists(gone) and _exists("durable_agent/workflows/prompt/workflow.py")


def test_every_named_path_exists() -> None:
    sources = _sources()
    assert len(sources) > 100, "the scan found the repository"
    missing = [f"{source.relative_to(ROOT)}:{number}: {path}" for source in sources
               for number, line in enumerate(source.read_text(encoding="utf-8", errors="ignore").splitlines(), 1)
               for path in named_paths(line) if not _exists(path)]
    assert missing == []


def test_every_test_module_has_a_name_of_its_own() -> None:
    """pytest imports test modules by basename (no packages under tests/unit and tests/temporal): two files of
    one name stop the whole run at collection."""
    modules = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(modules) > 100 and sorted({m for m in modules if modules.count(m) > 1}) == []
