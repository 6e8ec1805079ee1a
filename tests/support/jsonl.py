"""The JSON-lines files test tools write their side effects to (shared by the ledger and crash scenarios)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any


def read_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete JSON line of a file (empty if missing; a torn last line from a kill is skipped)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def append_line(path: Path, record: dict[str, Any], *, unless_kind_and_key_exist: bool = False) -> bool:
    """Append one line under an exclusive lock (fsynced); with the flag, skip it if the same kind+key is
    already there — the idempotent effect a real side-effecting tool would have. True if written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if unless_kind_and_key_exist:
                f.seek(0)
                for line in f.read().splitlines():
                    try:
                        existing = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if existing.get("kind") == record["kind"] and existing.get("key") == record["key"]:
                        return False
            f.seek(0, os.SEEK_END)
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
            return True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
