"""Optional extras: which `pip install 'durable-agent[EXTRA]'` brings which import, and one line saying so.

The core install (workflows, activities, worker, client, CLI, providers, scripted model) imports none of the
extras' packages. Code that needs one imports it through `import_extra` (or checks with `require`) at the
point of use, so a process loads MCP, OpenTelemetry, FastAPI/uvicorn or a cloud storage client only when it
is configured to use it, and a missing one fails with `MissingExtra`: one line naming the extra and the
command that installs it.

    mcp = import_extra("mcp", "mcp", feature="MCP servers as tools")

It lives in `agent/` (imports nothing but the standard library) so every layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Literal

__all__ = ["EXTRAS", "Extra", "MissingExtra", "explain_missing", "import_extra", "install_hint", "missing_modules",
           "require"]

Extra = Literal["api", "mcp", "otel", "server", "s3", "gcs", "bedrock", "testing", "slack", "email"]

# The top-level modules each extra installs (checked without importing them).
EXTRAS: dict[Extra, tuple[str, ...]] = {
    "api": ("fastapi", "uvicorn", "sse_starlette", "ag_ui"),
    "mcp": ("mcp",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "server": (),  # a binary, not a module: cli/devserver/binaries.py looks for the `temporal` executable
    "s3": ("aioboto3",),
    "gcs": ("gcloud.aio.storage",),
    "bedrock": ("boto3",),
    "testing": ("pytest_asyncio",),  # and the test server's binary (durable_agent/testing.py looks for it)
    "slack": ("slack_sdk",),  # Slack approval messages and buttons (activities/notify.py, api/routes/slack.py)
    "email": ("aiosmtplib",),  # approval e-mails
}


def install_hint(extra: Extra) -> str:
    return f"pip install 'durable-agent[{extra}]'"


class MissingExtra(ImportError):
    """A feature was used whose optional dependencies are not installed. The message is one line:
    what needs it, which extra, and the command to run."""

    def __init__(self, extra: Extra, feature: str, missing: str | None = None) -> None:
        self.extra = extra
        self.feature = feature
        detail = f" ({missing} is not installed)" if missing else ""
        super().__init__(f"{feature} needs the '{extra}' extra{detail}: {install_hint(extra)}", name=missing)


def _installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it (nor, when its parent is missing, failing)."""
    parent = module.split(".", 1)[0]
    try:
        if importlib.util.find_spec(parent) is None:
            return False
        return module == parent or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(extra: Extra) -> list[str]:
    """The modules of `extra` this environment lacks (empty: the extra is installed)."""
    return [module for module in EXTRAS[extra] if not _installed(module)]


def require(extra: Extra, feature: str) -> None:
    """Raise `MissingExtra` unless every module of `extra` is installed; imports nothing."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(extra, feature, missing[0])


def import_extra(module: str, extra: Extra, *, feature: str) -> ModuleType:
    """`importlib.import_module(module)`, or `MissingExtra` when it (or a package it needs) is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtra(extra, feature, exc.name or module) from None


def explain_missing(exc: ModuleNotFoundError, feature: str) -> ImportError:
    """`MissingExtra` for a module some extra installs (the safety net for an import that was not routed
    through `import_extra`), else `exc` itself."""
    name = exc.name or ""
    for extra, modules in EXTRAS.items():
        if any(name == m or name.startswith(m + ".") or m.startswith(name + ".") for m in modules):
            return MissingExtra(extra, feature, name)
    return exc
