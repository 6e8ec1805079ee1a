"""`dagent deploy ...`: roll out a new worker build with Temporal Worker Versioning (docs/operations.md).

    dagent deploy ls
    dagent deploy describe [--deployment NAME]
    dagent deploy set-current BUILD_ID [--deployment NAME]
    dagent deploy set-ramping BUILD_ID --percent 10 [--deployment NAME]
    dagent deploy set-ramping --stop [--deployment NAME]

The deployment defaults to DAGENT_DEPLOYMENT_NAME. Each is the same call as `temporal worker deployment
set-current-version / set-ramping-version / describe`; changes return once they have reached the task queues.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import typer

from durable_agent.cli.printed_lines import AddressOption

if TYPE_CHECKING:
    from temporalio.client import Client

deploy_app = typer.Typer(help="Worker Versioning rollouts: which build new prompts start on (DAGENT_DEPLOYMENT_NAME).",
                         no_args_is_help=True)

DeploymentOption = Annotated[str | None, typer.Option(
    "--deployment", help="Worker Deployment name (default: $DAGENT_DEPLOYMENT_NAME)")]


def _run(address: str | None, deployment: str | None, work: Callable[[Client, str], Awaitable[list[str]]],
         named: bool = True) -> None:
    """Connect as a worker does, run `work(client, the deployment's name)` and print its lines."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.workers.worker import connect

    settings = load_settings(address)
    name = deployment or settings.deployment_name or ""
    if named and not name:
        raise typer.BadParameter("give --deployment or set DAGENT_DEPLOYMENT_NAME")

    async def main() -> int:
        for line in await work(await connect(settings), name):
            console.print(line)
        return 0

    run_async(main, settings)


@deploy_app.command("ls")
def deploy_ls(address: AddressOption = None) -> None:
    """The namespace's Worker Deployments."""
    from durable_agent.workers.versioning import list_deployments

    async def work(client: Client, _: str) -> list[str]:
        return await list_deployments(client)

    _run(address, None, work, named=False)


@deploy_app.command("describe")
def deploy_describe(deployment: DeploymentOption = None, address: AddressOption = None,
                    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """Versions of the deployment: which is current, which ramps, which are draining or drained."""
    from durable_agent.workers.versioning import describe_deployment

    async def work(client: Client, name: str) -> list[str]:
        view = await describe_deployment(client, name)
        if as_json:
            return [json.dumps(view.model_dump(mode="json"))]
        ramp = f", ramping {view.ramping} at {view.ramping_percent:g}%" if view.ramping else ""
        lines = [f"deployment {view.name}: current {view.current or '(none: unversioned workers)'}{ramp}"
                 f"{'' if view.routing_propagated else ' (routing change in progress)'}"]
        for version in view.versions:
            drain = f" {version.drainage.lower()}" if version.drainage else ""
            created = f" created {version.created_at:%Y-%m-%d %H:%M}" if version.created_at else ""
            lines.append(f"  {version.build_id:<20} {version.status.lower()}{drain}{created}")
        return lines

    _run(address, deployment, work)


@deploy_app.command("set-current")
def deploy_set_current(build_id: Annotated[str, typer.Argument(help="The build id new prompts start on")],
                       deployment: DeploymentOption = None, address: AddressOption = None) -> None:
    """New prompts start on this build; prompts already running stay on the build they started on."""
    from durable_agent.workers.versioning import set_current_version

    async def work(client: Client, name: str) -> list[str]:
        await set_current_version(client, name, build_id)
        return [f"{name}: current version {build_id}"]

    _run(address, deployment, work)


@deploy_app.command("set-ramping")
def deploy_set_ramping(
    build_id: Annotated[str | None, typer.Argument(help="The build id to ramp (omit with --stop)")] = None,
    percent: Annotated[float, typer.Option(help="Share of new prompts that start on it, 0-100")] = 10.0,
    stop: Annotated[bool, typer.Option("--stop", help="Stop ramping: every new prompt on the current build")] = False,
    deployment: DeploymentOption = None, address: AddressOption = None,
) -> None:
    """Send a share of new prompts to a build before making it current."""
    from durable_agent.workers.versioning import set_ramping_version

    if not stop and not build_id:
        raise typer.BadParameter("give a build id to ramp, or --stop")

    async def work(client: Client, name: str) -> list[str]:
        await set_ramping_version(client, name, None if stop else build_id, percent)
        return [f"{name}: {'no ramping version' if stop else f'ramping {build_id} at {percent:g}%'}"]

    _run(address, deployment, work)
