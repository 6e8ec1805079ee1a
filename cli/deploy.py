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
from typing import Annotated

import typer

from durable_agent.cli.printed_lines import AddressOption

deploy_app = typer.Typer(help="Worker Versioning rollouts: which build new prompts start on (DAGENT_DEPLOYMENT_NAME).",
                         no_args_is_help=True)

DeploymentOption = Annotated[str | None, typer.Option(
    "--deployment", help="Worker Deployment name (default: $DAGENT_DEPLOYMENT_NAME)")]


def _name(deployment: str | None, default: str | None) -> str:
    name = deployment or default
    if not name:
        raise typer.BadParameter("give --deployment or set DAGENT_DEPLOYMENT_NAME")
    return name


@deploy_app.command("ls")
def deploy_ls(address: AddressOption = None) -> None:
    """The namespace's Worker Deployments."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.workers.versioning import list_deployments
    from durable_agent.workers.worker import connect

    settings = load_settings(address)

    async def main() -> int:
        for name in await list_deployments(await connect(settings)):
            console.print(name)
        return 0

    run_async(main, settings)


@deploy_app.command("describe")
def deploy_describe(deployment: DeploymentOption = None, address: AddressOption = None,
                    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """Versions of the deployment: which is current, which ramps, which are draining or drained."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.workers.versioning import describe_deployment
    from durable_agent.workers.worker import connect

    settings = load_settings(address)
    name = _name(deployment, settings.deployment_name)

    async def main() -> int:
        view = await describe_deployment(await connect(settings), name)
        if as_json:
            console.print(json.dumps(view.model_dump(mode="json")))
            return 0
        ramp = f", ramping {view.ramping} at {view.ramping_percent:g}%" if view.ramping else ""
        console.print(f"deployment {view.name}: current {view.current or '(none: unversioned workers)'}{ramp}"
                      f"{'' if view.routing_propagated else ' (routing change in progress)'}")
        for version in view.versions:
            drain = f" {version.drainage.lower()}" if version.drainage else ""
            created = f" created {version.created_at:%Y-%m-%d %H:%M}" if version.created_at else ""
            console.print(f"  {version.build_id:<20} {version.status.lower()}{drain}{created}")
        return 0

    run_async(main, settings)


@deploy_app.command("set-current")
def deploy_set_current(build_id: Annotated[str, typer.Argument(help="The build id new prompts start on")],
                       deployment: DeploymentOption = None, address: AddressOption = None) -> None:
    """New prompts start on this build; prompts already running stay on the build they started on."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.workers.versioning import set_current_version
    from durable_agent.workers.worker import connect

    settings = load_settings(address)
    name = _name(deployment, settings.deployment_name)

    async def main() -> int:
        await set_current_version(await connect(settings), name, build_id)
        console.print(f"{name}: current version {build_id}")
        return 0

    run_async(main, settings)


@deploy_app.command("set-ramping")
def deploy_set_ramping(
    build_id: Annotated[str | None, typer.Argument(help="The build id to ramp (omit with --stop)")] = None,
    percent: Annotated[float, typer.Option(help="Share of new prompts that start on it, 0-100")] = 10.0,
    stop: Annotated[bool, typer.Option("--stop", help="Stop ramping: every new prompt on the current build")] = False,
    deployment: DeploymentOption = None, address: AddressOption = None,
) -> None:
    """Send a share of new prompts to a build before making it current."""
    from durable_agent.cli.common import console, load_settings, run_async
    from durable_agent.workers.versioning import set_ramping_version
    from durable_agent.workers.worker import connect

    settings = load_settings(address)
    name = _name(deployment, settings.deployment_name)
    if not stop and not build_id:
        raise typer.BadParameter("give a build id to ramp, or --stop")

    async def main() -> int:
        await set_ramping_version(await connect(settings), name, None if stop else build_id, percent)
        console.print(f"{name}: {'no ramping version' if stop else f'ramping {build_id} at {percent:g}%'}")
        return 0

    run_async(main, settings)
