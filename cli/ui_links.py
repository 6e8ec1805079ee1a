"""Which Temporal UI every link points at (`dagent run`/`watch`/`show`/`ls`, `dagent api`'s `links.temporal_ui`,
the quick start): the address the server really has.

1. `DAGENT_UI_URL` when set: the deployment says where its UI is (a cluster, a proxy, another host).
2. Otherwise the UI of the dev server that `dagent server` (or `dagent demo`) started for `TEMPORAL_ADDRESS` on
   this machine: each records its gRPC address, UI address and pid in a small file when it starts
   (`remember_server`) and removes it when it stops (`forget_server`). A record whose process is gone is
   ignored (and removed), so a killed server never sends links to a dead port.
3. Otherwise the default, http://127.0.0.1:8233 (`temporal server start-dev`'s own UI).

Nothing guesses: no scan of other processes, no port arithmetic.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import BaseModel, ValidationError

from durable_agent.workers.settings import Settings

UI_URL_ENV = "DAGENT_UI_URL"
SERVERS_DIR_ENV = "DAGENT_SERVERS_DIR"  # where the records live (default: ~/.cache/dagent/servers)
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}


class ServerRecord(BaseModel):
    """What a dev server started by `dagent` has: its gRPC address, its UI's base URL and its process."""

    address: str
    ui_url: str | None
    pid: int


def servers_dir() -> Path:
    configured = os.environ.get(SERVERS_DIR_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "dagent" / "servers"


def _record_path(address: str) -> Path | None:
    """The record file for a gRPC address on this machine, or None (another host: no local record applies)."""
    host, _, port = address.rpartition(":")
    if host.strip("[]") not in _LOCAL_HOSTS or not port.isdigit():
        return None
    return servers_dir() / f"{int(port)}.json"


def remember_server(address: str, ui_url: str | None, pid: int | None) -> None:
    """Record the UI of the dev server just started on `address` (by `dagent server` / `dagent demo`)."""
    path = _record_path(address)
    if path is None or pid is None:
        return
    with contextlib.suppress(OSError):  # no writable home: links fall back to DAGENT_UI_URL or the default
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(ServerRecord(address=address, ui_url=ui_url, pid=pid).model_dump_json())
        temporary.replace(path)


def forget_server(address: str, pid: int | None) -> None:
    """Remove the record of the server on `address` (only if it is this server's: same pid)."""
    record = _read(address)
    path = _record_path(address)
    if record is not None and path is not None and record.pid == pid:
        with contextlib.suppress(OSError):
            path.unlink()


def recorded_ui(address: str) -> str | None:
    """The UI of the live dev server `dagent` started on `address`, or None."""
    record = _read(address)
    if record is None:
        return None
    if not _alive(record.pid):
        forget_server(address, record.pid)
        return None
    return record.ui_url


def with_ui_url(settings: Settings) -> Settings:
    """`settings` with the UI address the server really has (unless DAGENT_UI_URL says otherwise)."""
    if os.environ.get(UI_URL_ENV):
        return settings
    found = recorded_ui(settings.temporal_address)
    return settings.model_copy(update={"ui_url": found}) if found else settings


def _read(address: str) -> ServerRecord | None:
    path = _record_path(address)
    if path is None:
        return None
    try:
        return ServerRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
