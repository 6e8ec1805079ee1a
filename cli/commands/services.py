"""Long-running `dagent` processes: the dev server, the worker, the codec server, the HTTP API, the demo."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli import common
from durable_agent.cli.common import AddressOption, ProfileOption, console, err_console
from durable_agent.cli.errors import REFUSED, report

if TYPE_CHECKING:
    from durable_agent.workers.settings import Settings

app = typer.Typer()

DEMO_INPUT = "Plan my Paris trip: check the weather, write me a short report and pay the $250 hotel deposit."


@app.command()
def server(
    port: Annotated[int, typer.Option(help="gRPC port")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port")] = 8233,
    db_file: Annotated[Path, typer.Option(help="SQLite file: state survives restarts")] = Path(".dagent/temporal.db"),
) -> None:
    """Run the embedded Temporal dev server (with UI and persistent storage) until Ctrl-C (`server` extra)."""
    from durable_agent.cli.devserver import DevServer
    from durable_agent.cli.devserver.binaries import temporal_cli_path
    from durable_agent.cli.ui_links import UI_URL_ENV, forget_server, remember_server

    temporal_cli_path()  # MissingExtra: one line naming the `server` extra
    common.require_free_port("127.0.0.1", port, "--port")
    common.require_free_port("127.0.0.1", ui_port, "--ui-port")
    dev = DevServer(port=port, ui_port=ui_port, db_file=db_file)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # so sigwait receives them
    dev.start()
    remember_server(dev.address, dev.ui_url, dev.pid)  # `dagent` on this machine links to this UI
    console.print(f"Temporal dev server on {dev.address}  UI: {dev.ui_url}  db: {dev.db_file}")
    console.print(f"Log: {dev.log_file}. Ctrl-C stops it.")
    if ui_port != 8233:
        console.print(f"`dagent` on this machine links to this UI by itself; elsewhere set {UI_URL_ENV}={dev.ui_url}")
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    forget_server(dev.address, dev.pid)
    dev.stop()
    common.exit_now(0)


@app.command()
def worker(
    address: AddressOption = None,
    profile: ProfileOption = None,
    plugin: Annotated[list[str] | None, typer.Option(help="Plugin import path module:attr (repeatable)")] = None,
    model_normal: Annotated[str | None, typer.Option(help="provider:model for the normal tier")] = None,
    model_high: Annotated[str | None, typer.Option(help="provider:model for the high tier")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve Prometheus metrics on this port at /metrics (default: $DAGENT_METRICS_PORT)")] = None,
    ready_file: Annotated[Path | None, typer.Option(envvar="DAGENT_READY_FILE", help="Write this file while the "
                                                    "server sees the worker poll (`dagent worker-ready`)")] = None,
) -> None:
    """Run a worker: PromptWorkflow plus the model and tool activities, until Ctrl-C or SIGTERM."""
    given = {"TEMPORAL_ADDRESS": address, "TEMPORAL_PROFILE": profile, "DAGENT_PLUGINS": ",".join(plugin or []) or None,
             "DAGENT_MODEL_NORMAL": model_normal, "DAGENT_MODEL_HIGH": model_high,
             "DAGENT_METRICS_PORT": None if metrics_port is None else str(metrics_port),
             "DAGENT_READY_FILE": None if ready_file is None else str(ready_file)}
    os.environ.update({name: value for name, value in given.items() if value})
    sys.stdout.flush()
    sys.stderr.flush()
    # The worker runs for days: it becomes a process without the command line's modules (cli/worker_process.py),
    # which reads the settings (a bad variable or profile is refused there, in one line, exit code 2).
    os.execv(sys.executable, [sys.executable, "-m", "durable_agent.cli.worker_process"])


@app.command("codec-server")
def codec_server(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 8081,
    cors_origin: Annotated[list[str] | None, typer.Option(
        help="Origin of the Temporal UI allowed to call it (repeatable; default: $DAGENT_UI_URL)")] = None,
) -> None:
    """Serve the payload codec over HTTP (/encode, /decode) for the Temporal UI and CLI.

    Keys from DAGENT_CODEC_KEYS; every request must carry `Authorization: Bearer $DAGENT_CODEC_AUTH_TOKEN`
    when that variable is set."""
    from durable_agent.cli import errors
    from durable_agent.config.storage.codec_server import serve

    settings = common.load_settings(None)
    origins = list(cors_origin or settings.codec_cors_origins or [settings.ui_url])
    token = settings.codec_auth_token.get_secret_value() if settings.codec_auth_token else None

    async def main() -> int:
        codec = settings.codec()
        if codec is None:
            raise ValueError("DAGENT_CODEC_KEYS is not set: there is nothing to decode with")
        runner = await serve(codec, host=host, port=port, origins=origins, auth_token=token)
        err_console.print(f"codec server on http://{host}:{port} keys={','.join(codec.key_ids)} "
                          f"active={codec.active_key_id} cors={','.join(origins)} auth={'on' if token else 'off'}")
        await errors.until_interrupted()
        await runner.cleanup()
        return 0

    common.run_async(main)


@app.command()
def api(
    address: AddressOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8000,
    config: Annotated[Path | None, typer.Option(help="API config (TOML): API keys, OIDC, limits; "
                                                     "default $DAGENT_API_CONFIG")] = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), live events (SSE, AG-UI) and the inbox and chat pages (`api` extra)."""
    from durable_agent.agent.extras import require

    require("api", "dagent api")
    import uvicorn

    from durable_agent.api import create_app
    from durable_agent.api.config import ApiConfig

    settings = common.load_settings(address)
    app_ = create_app(config=ApiConfig.load(config), settings=settings)
    _can_serve(settings, host, port)
    err_console.print(f"API on http://{host}:{port}  (docs /docs, inbox /inbox, chat /chat) "
                      f"Temporal {settings.temporal_address}")
    uvicorn.run(app_, host=host, port=port, log_level=settings.log_level.lower(), proxy_headers=True)
    common.exit_now(0)


def _can_serve(settings: Settings, host: str, port: int) -> None:
    """Before the web server starts: the port is free and Temporal answers; if not, one line and exit 1 (the
    server's own startup failure is a traceback)."""
    import asyncio

    from durable_agent.client import AgentClient

    common.require_free_port(host, port, "--port")

    async def reachable() -> None:
        await AgentClient.connect(settings)

    try:
        asyncio.run(common.explained(reachable, settings))
    except common.Explained as exc:
        report("error", exc)
        common.exit_now(exc.code)
    except Exception as exc:
        report("error", exc)
        common.exit_now(REFUSED)


@app.command()
def demo(
    db_file: Annotated[Path, typer.Option(help="SQLite file of the embedded server")] = Path(".dagent/demo.db"),
    port: Annotated[int, typer.Option(help="gRPC port (a free one if taken)")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port (a free one if taken)")] = 8233,
    keep: Annotated[bool, typer.Option(help="Keep the server running afterwards to browse the UI")] = False,
    interactive: Annotated[bool | None, typer.Option("--interactive/--no-interactive",
                                                     help="Ask for the approval (default: when on a TTY)")] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Print the prompt's OpenTelemetry span tree")] = False,
) -> None:
    """The quick start: embedded dev server + worker + a prompt that needs an approval (`server` extra)."""
    from durable_agent.agent.extras import require
    from durable_agent.agent.logging import configure_logging
    from durable_agent.cli.demo import run_demo
    from durable_agent.cli.devserver.binaries import temporal_cli_path

    temporal_cli_path()  # MissingExtra: one line naming the `server` extra
    if trace:
        require("otel", "dagent demo --trace")

    configure_logging(os.environ.get("DAGENT_LOG_LEVEL", "WARNING"))
    ask = sys.stdin.isatty() if interactive is None else interactive
    common.run_async(lambda: run_demo(db_file=db_file, keep=keep, interactive=ask, console=console,
                                input_text=DEMO_INPUT, port=port, ui_port=ui_port, trace=trace))
