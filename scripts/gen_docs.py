"""Write the generated parts of the docs: the settings table of docs/configuration.md, docs/cli.md and the
every-module table of docs/code-map.md.

    .venv/bin/python scripts/gen_docs.py           # rewrite them
    .venv/bin/python scripts/gen_docs.py --check   # exit 1 and name the pages that drifted

The settings table comes from the `Settings` pydantic model (workers/settings.py): one row per field, the
variable(s) and the text from the field's description (`"DAGENT_X: what it does"`), the default from the
field, grouped by the `# --- ... ---` comments of the class body. The CLI reference is typer's own Markdown
(`typer.cli.get_docs_for_click`, what `typer ... utils docs` prints) for the `dagent` app (cli/app.py). The
module table lists every product module with the first sentence of its docstring (a module without one fails).
tests/temporal/test_docs.py fails when a committed page differs from what this script writes.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION_PAGE = ROOT / "docs" / "configuration.md"
CLI_PAGE = ROOT / "docs" / "cli.md"
BEGIN = "<!-- BEGIN GENERATED: settings (scripts/gen_docs.py; do not edit by hand) -->"
END = "<!-- END GENERATED: settings -->"
CODE_MAP_PAGE = ROOT / "docs" / "code-map.md"
MODULES_BEGIN = "<!-- BEGIN GENERATED: modules (scripts/gen_docs.py; do not edit by hand) -->"
MODULES_END = "<!-- END GENERATED: modules -->"
PRODUCT = ("agent", "config", "plugins", "workflows", "activities", "workers", "client", "api", "cli", "durable_agent")

# A description starts with the variable(s) it is read from: "DAGENT_X: ...", "DAGENT_X (worker): ...",
# "DAGENT_X (PEM) or DAGENT_X_FILE: ...", "DAGENT_LOG_LEVEL." -- everything before the first ": " or ".".
_LEAD = re.compile(r"^(?P<lead>[A-Z][A-Z0-9_]*(?:\s*\([^)]*\))?(?:\s+or\s+[A-Z][A-Z0-9_]*)*)(?::\s*|\.\s*$)")
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*\*?")
_SECTION = re.compile(r"^\s*# --- (?P<title>.+?) -+\s*$")
_FIELD = re.compile(r"^    (?P<name>[a-z_][a-z0-9_]*)\s*:")


def _cell(text: str) -> str:
    """Table-cell safe: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, list)):
        return f"`{','.join(map(str, value))}`" if value else "(empty)"
    if isinstance(value, dict) or value == "":
        return "(empty)" if not value else f"`{value}`"
    return f"`{value}`"


def _variables_and_text(name: str, description: str) -> tuple[str, str]:
    """("`DAGENT_X`", "what it does") from a field description; fields with no variable of their own list
    the variables their description names."""
    if match := _LEAD.match(description):
        lead = match.group("lead")
        names = _VARIABLE.findall(lead)
        qualifier = re.search(r"\(([^)]*)\)", lead)
        variables = ", ".join(f"`{v}`" for v in names)
        text = description[match.end():].strip()
        if qualifier:
            text = f"({qualifier.group(1)}) {text}".strip()
        return variables, text or "—"
    named = dict.fromkeys(_VARIABLE.findall(description))
    return (", ".join(f"`{v}`" for v in named) or "—"), description


def _sections(model: type) -> dict[str, str]:
    """Field name -> the `# --- title ---` comment above it in the body of the class that declares it, or of a
    base class (`WorkerSettings` extends `ClientSettings`); "" before the first."""
    found: dict[str, str] = {}
    for declaring in reversed(model.__mro__):
        if "__pydantic_fields__" in vars(declaring) and declaring.__module__.startswith("durable_agent"):
            found.update(_declared_sections(declaring))
    return found


def _declared_sections(model: type) -> dict[str, str]:
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return {}
    section, found = "", {}
    for line in source.splitlines():
        if heading := _SECTION.match(line):
            section = heading.group("title").strip()
        elif field := _FIELD.match(line):
            found.setdefault(field.group("name"), section)
    return found


def settings_table(model: type | None = None) -> str:
    """The reference table of every `Settings` field, as Markdown (between the page's markers)."""
    if model is None:
        from durable_agent.workers.settings import Settings

        model = Settings
    sections = _sections(model)
    groups: dict[str, list[str]] = {}
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        description = (field.description or "").strip()
        if not description:
            raise ValueError(f"Settings.{name} has no description: say which variable it is read from")
        variables, text = _variables_and_text(name, description)
        row = f"| {variables} | `{name}` | {_default(field)} | {_cell(text)} |"
        groups.setdefault(sections.get(name, ""), []).append(row)
    out: list[str] = []
    for title, rows in groups.items():
        if title:
            out += [f"**{title[0].upper()}{title[1:]}**", ""]
        out += ["| variable | `Settings` field | default | meaning |", "|---|---|---|---|", *rows, ""]
    return "\n".join(out).rstrip("\n") + "\n"


def configuration_page(current: str) -> str:
    """`current` (docs/configuration.md) with the text between the markers replaced by the table."""
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{CONFIGURATION_PAGE.name} lacks the markers {BEGIN!r} ... {END!r}")
    return current[: start + len(BEGIN)] + "\n" + settings_table() + END + current[end + len(END):]


def _escape_html(markdown: str) -> str:
    """`<` and `>` in prose would be read as HTML tags; escape them outside code spans and fences."""
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fence = not fence
        if not fence:
            parts = line.split("`")
            line = "`".join(p.replace("<", "&lt;").replace(">", "&gt;") if i % 2 == 0 else p
                            for i, p in enumerate(parts))
        out.append(line)
    return "\n".join(out)


def cli_page(app: Any = None) -> str:
    """docs/cli.md: typer's Markdown for the `dagent` app, under a title that says where it comes from."""
    import typer
    from typer.cli import get_docs_for_click

    if app is None:
        from durable_agent.cli.app import app
    command = typer.main.get_command(app)
    body = get_docs_for_click(obj=command, ctx=typer.Context(command), name="dagent", indent=1)
    header = (
        "# CLI reference\n\n"
        "<!-- Generated by scripts/gen_docs.py from cli/app.py: do not edit by hand. -->\n\n"
        "Every `dagent` command with its arguments and options, generated from the Typer app "
        "(`durable_agent.cli.app`). How the commands behave for scripts (one JSON document with `--json`, "
        "one-line errors, exit codes) is in [Client and CLI](client-and-cli.md#the-dagent-cli).\n\n"
    )
    return header + _escape_html(body.strip()) + "\n"


def _cli_page_as_documented() -> str:
    """`cli_page()` in a fresh interpreter whose $USER is the literal `$USER`: some options default to the
    user running the command (`--by`, `--user`), read when cli/app.py is imported; the page says so."""
    env = {**os.environ, "USER": "$USER"}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--print-cli"], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"generating {CLI_PAGE.name} failed:\n{done.stderr}")
    return done.stdout


def _first_sentence(docstring: str) -> str:
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    end = re.search(r"[.:;](\s|$)", paragraph)
    return paragraph[:end.start() + 1].rstrip(":;") if end else paragraph


def module_table(root: Path = ROOT) -> str:
    """Every product module (an `__init__.py` only when it has a docstring) and what its docstring says first."""
    import ast

    rows = []
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            if not docstring:
                if path.name == "__init__.py":
                    continue
                raise ValueError(f"{path.relative_to(root)} has no docstring to describe it")
            rows.append(f"| `{path.relative_to(root).as_posix()}` | {_cell(_first_sentence(docstring))} |")
    return "\n".join(["| module | what it is |", "|---|---|", *rows])


def code_map_page(current: str) -> str:
    if MODULES_BEGIN not in current or MODULES_END not in current:
        raise ValueError(f"{CODE_MAP_PAGE.name} lacks the markers {MODULES_BEGIN!r} ... {MODULES_END!r}")
    head, rest = current.split(MODULES_BEGIN, 1)
    _, tail = rest.split(MODULES_END, 1)
    return f"{head}{MODULES_BEGIN}\n{module_table()}\n{MODULES_END}{tail}"


def pages() -> Iterator[tuple[Path, str]]:
    """Each generated page and the text it should have."""
    yield CONFIGURATION_PAGE, configuration_page(CONFIGURATION_PAGE.read_text(encoding="utf-8"))
    yield CLI_PAGE, _cli_page_as_documented()
    yield CODE_MAP_PAGE, code_map_page(CODE_MAP_PAGE.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages that differ; exit 1 if any")
    parser.add_argument("--print-cli", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.print_cli:
        sys.stdout.write(cli_page())
        return 0
    stale = []
    for path, text in pages():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))} (run .venv/bin/python scripts/gen_docs.py)",
              file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
