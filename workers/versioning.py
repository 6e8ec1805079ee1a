"""Temporal Worker Versioning: workers join a Worker Deployment with a build id, and rollouts move traffic.

Off by default: without DAGENT_DEPLOYMENT_NAME and DAGENT_BUILD_ID a worker is unversioned, as before. With
them, every `Worker` of the process polls as version `<deployment>.<build id>`; the server sends a new prompt
to the deployment's *current* version (or the *ramping* one for a share of starts), keeps each pinned prompt
on the version it started on (workflows/versioning/deployment.py), and reports a version as drained once nothing pinned
to it is still open. Rollout (`dagent deploy ...`, or `temporal worker deployment ...`):

    dagent deploy describe                   # versions, which is current / ramping, drainage
    dagent deploy set-current <build id>     # new prompts start on it; pinned ones stay where they are
    dagent deploy set-ramping <build id> --percent 10
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    ListWorkerDeploymentsRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from durable_agent.workers.settings import Settings
from durable_agent.workflows.sdk_private import workflow_definition

__all__ = ["DeploymentError", "DeploymentView", "UnversionedWorkflow", "VersionView", "check_versioning_behaviors",
           "deployment_config", "describe_deployment",
           "list_deployments", "set_current_version", "set_ramping_version", "wait_for_routing"]

IDENTITY = "dagent deploy"
ROUTING_WAIT_SECONDS = 60.0


class DeploymentError(Exception):
    """A rollout request the server refused, in one line."""


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The worker's deployment version when DAGENT_DEPLOYMENT_NAME and DAGENT_BUILD_ID are set, else None.

    Each workflow type declares its own versioning behavior (workflows/versioning/deployment.py), so no default is set
    here: a workflow added later without one is refused by the worker at start, not silently auto-upgraded."""
    if not settings.deployment_name or not settings.build_id:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=settings.deployment_name, build_id=settings.build_id),
        use_worker_versioning=True)


class UnversionedWorkflow(ValueError):
    """A workflow on a versioned worker declares no versioning behavior (one line naming the options)."""


def check_versioning_behaviors(workflows: Sequence[type], deployment: WorkerDeploymentConfig | None) -> None:
    """Temporal's two rules on versioning behaviors, as one line naming the way out before a worker polls:
    on a versioned worker every workflow needs a behavior (the SDK refuses, naming no option); on an
    unversioned one none may have one (the server fails each of its workflow tasks: the workflow is stuck).
    A team's workflow keeps the behavior it declares; ours declare theirs on versioned workers only
    (workflows/versioning/deployment.py)."""
    versioned = deployment is not None and deployment.use_worker_versioning
    for workflow_class in workflows:
        defn = workflow_definition(workflow_class)
        if defn is None or defn.dynamic_config_fn:
            continue
        declared = defn.versioning_behavior not in (None, VersioningBehavior.UNSPECIFIED)
        if not versioned and declared:
            raise UnversionedWorkflow(
                f"workflow {defn.name} declares versioning behavior {defn.versioning_behavior.name} "  # type: ignore[union-attr]
                "but this worker is not versioned (Temporal would fail every task of it): set "
                "DAGENT_DEPLOYMENT_NAME and DAGENT_BUILD_ID (Settings.deployment_name, build_id), or pass the "
                "Worker a deployment_config=WorkerDeploymentConfig(..., use_worker_versioning=True)")
        if versioned and not declared and deployment.default_versioning_behavior in (  # type: ignore[union-attr]
                None, VersioningBehavior.UNSPECIFIED):
            version = deployment.version  # type: ignore[union-attr]
            raise UnversionedWorkflow(
                f"workflow {defn.name} declares no versioning behavior and this worker polls as deployment version "
                f"{version.deployment_name}.{version.build_id}: give it "
                "@workflow.defn(versioning_behavior=VersioningBehavior.PINNED or AUTO_UPGRADE), or pass the Worker "
                "a deployment_config=WorkerDeploymentConfig(..., default_versioning_behavior=...)")


class VersionView(BaseModel):
    build_id: str
    status: str  # INACTIVE, CURRENT, RAMPING, DRAINING, DRAINED
    drainage: str | None = None  # DRAINING / DRAINED once no longer current or ramping
    created_at: datetime | None = None


class DeploymentView(BaseModel):
    name: str
    current: str | None
    ramping: str | None
    ramping_percent: float
    versions: list[VersionView]
    routing_propagated: bool = True  # False while the last routing change is still reaching the task queues


def _one_line(exc: RPCError, what: str) -> DeploymentError:
    message = exc.message.splitlines()[0] if exc.message else exc.status.name if exc.status else "error"
    if exc.status == RPCStatusCode.NOT_FOUND:
        return DeploymentError(f"{what}: not found ({message})")
    return DeploymentError(f"{what}: {message}")


async def describe_deployment(client: Client, name: str) -> DeploymentView:
    """Versions of deployment `name`, which one is current and which ramps (DeploymentError if unknown)."""
    from temporalio.api.enums.v1 import RoutingConfigUpdateState, VersionDrainageStatus, WorkerDeploymentVersionStatus

    try:
        reply = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name), retry=True)
    except RPCError as exc:
        raise _one_line(exc, f"deployment {name}") from None
    info = reply.worker_deployment_info
    routing = info.routing_config
    versions = [
        VersionView(
            build_id=summary.deployment_version.build_id,
            status=WorkerDeploymentVersionStatus.Name(summary.status).removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_"),
            drainage=VersionDrainageStatus.Name(summary.drainage_status).removeprefix("VERSION_DRAINAGE_STATUS_")
            if summary.drainage_status else None,
            created_at=summary.create_time.ToDatetime().astimezone() if summary.HasField("create_time") else None,
        )
        for summary in info.version_summaries
    ]
    return DeploymentView(
        name=info.name,
        current=routing.current_deployment_version.build_id or None,
        ramping=routing.ramping_deployment_version.build_id or None,
        ramping_percent=routing.ramping_version_percentage,
        versions=sorted(versions, key=lambda v: (v.created_at is None, v.created_at)),
        routing_propagated=info.routing_config_update_state
        != RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS,
    )


async def wait_for_routing(client: Client, name: str, timeout: float = ROUTING_WAIT_SECONDS) -> DeploymentView:
    """Wait until the deployment's last routing change has reached its task queues: until then some new
    prompts may still start on the previous version (DeploymentError after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        view = await describe_deployment(client, name)
        if view.routing_propagated:
            return view
        if time.monotonic() > deadline:
            raise DeploymentError(f"deployment {name}: the routing change has not reached every task queue "
                                  f"after {timeout:g} s (see `dagent deploy describe`)")
        await asyncio.sleep(0.2)


async def list_deployments(client: Client) -> list[str]:
    names: list[str] = []
    token = b""
    while True:
        try:
            reply = await client.workflow_service.list_worker_deployments(
                ListWorkerDeploymentsRequest(namespace=client.namespace, page_size=100, next_page_token=token),
                retry=True)
        except RPCError as exc:
            raise _one_line(exc, "listing deployments") from None
        names += [summary.name for summary in reply.worker_deployments]
        token = reply.next_page_token
        if not token:
            return names


async def set_current_version(client: Client, name: str, build_id: str, *, wait: bool = True) -> None:
    """New prompts start on `build_id`; prompts pinned to other versions stay there (DeploymentError if refused,
    e.g. no worker of that build has polled yet). `wait`: return once the change has reached the task queues."""
    try:
        await client.workflow_service.set_worker_deployment_current_version(SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace, deployment_name=name, build_id=build_id, identity=IDENTITY), retry=True)
    except RPCError as exc:
        raise _one_line(exc, f"set {name}.{build_id} current") from None
    if wait:
        await wait_for_routing(client, name)


async def set_ramping_version(client: Client, name: str, build_id: str | None, percent: float, *,
                              wait: bool = True) -> None:
    """Send `percent` of new prompts to `build_id` (None: stop ramping); the rest go to the current version.
    `wait`: return once the change has reached the task queues."""
    if not 0 <= percent <= 100:
        raise DeploymentError(f"ramp percentage must be between 0 and 100, not {percent:g}")
    try:
        await client.workflow_service.set_worker_deployment_ramping_version(SetWorkerDeploymentRampingVersionRequest(
            namespace=client.namespace, deployment_name=name, build_id=build_id or "",
            percentage=percent if build_id else 0, identity=IDENTITY), retry=True)
    except RPCError as exc:
        raise _one_line(exc, f"ramp {name}.{build_id or '(none)'}") from None
    if wait:
        await wait_for_routing(client, name)


