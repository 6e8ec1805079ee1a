"""Which Temporal UI the CLI's links point at: `DAGENT_UI_URL` when set; otherwise the UI of the dev server
that serves `TEMPORAL_ADDRESS` on this machine (`dagent server`, `dagent demo` or `temporal server start-dev`,
found by its command line: its `--ui-port`, else the CLI's default of `--port` + 1000); otherwise the
default (http://127.0.0.1:8233)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from durable_agent.workers.settings import Settings

UI_URL_ENV = "DAGENT_UI_URL"
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}
UI_PORT_OFFSET = 1000  # `temporal server start-dev`: the UI's port defaults to the gRPC port + 1000


def with_ui_url(settings: Settings) -> Settings:
    """`settings` with the UI address the server really has (unless DAGENT_UI_URL says otherwise)."""
    if os.environ.get(UI_URL_ENV):
        return settings
    found = local_dev_server_ui(settings.temporal_address)
    return settings.model_copy(update={"ui_url": found}) if found else settings


def local_dev_server_ui(address: str, command_lines: Iterable[Sequence[str]] | None = None) -> str | None:
    """The UI base URL of the local dev server listening on `address`, or None (not local, not found, or
    headless). `command_lines`: for tests; default: every process's (Linux /proc)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host not in _LOCAL_HOSTS or not port.isdigit():
        return None
    for args in _proc_command_lines() if command_lines is None else command_lines:
        if "start-dev" not in args:
            continue
        options = _options(args)
        if options.get("port", "7233") != port:
            continue
        if "headless" in options:
            return None
        ui_port = options.get("ui-port") or str(int(port) + UI_PORT_OFFSET)
        ui_host = options.get("ui-ip") or options.get("ip") or "127.0.0.1"
        ui_host = "localhost" if ui_host in ("127.0.0.1", "0.0.0.0", "") else ui_host
        return f"http://{ui_host}:{ui_port}"
    return None


def _options(args: Sequence[str]) -> dict[str, str]:
    """`--name value`, `--name=value` and `-p value` of a `temporal server start-dev` command line."""
    options: dict[str, str] = {}
    flags = {"headless"}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        name = "port" if arg == "-p" else arg[2:] if arg.startswith("--") else None
        if name is None:
            continue
        if "=" in name:
            name, _, value = name.partition("=")
            options[name] = value
        elif name in flags:
            options[name] = ""
        elif position < len(args):
            options[name] = args[position]
            position += 1
    return options


def _proc_command_lines() -> Iterable[list[str]]:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            raw = cmdline.read_bytes()
        except OSError:
            continue
        if b"start-dev" in raw:
            yield [part.decode(errors="replace") for part in raw.split(b"\0") if part]
