"""Removing the blobs of workflows Temporal no longer keeps: `dagent store sweep` for the local directory.

Blobs live under a prefix per namespace and workflow (`v0/ns/<ns>/wt/<type>/wi/<id>/ri/<run>/…` for
payloads, `v0/ns/<ns>/files/wi/<id>/…` for files). A workflow's blobs are removed once Temporal has
forgotten the workflow (its history is gone after the namespace's retention) or once it has been closed
for longer than the namespace's retention. Running workflows, workflows within retention, and anything
written within the last `grace` (a client stores a workflow's input before the workflow exists) are kept.
On S3 and GCS a lifecycle rule on the `v0/ns/<ns>/` prefix does the same job (see README "Deploying").
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.workers.blobstore import encode_segment

DEFAULT_GRACE = timedelta(hours=1)


@dataclass
class SweepReport:
    removed: list[str] = field(default_factory=list)  # workflow ids (and runs) whose blobs were removed
    kept: list[str] = field(default_factory=list)
    bytes_removed: int = 0
    retention: timedelta | None = None


@dataclass(frozen=True)
class _Group:
    workflow_id: str
    run_id: str | None
    path: Path


def _groups(root: Path, namespace: str) -> list[_Group]:
    base = root / "v0" / "ns" / encode_segment(namespace)
    groups: list[_Group] = []
    for run_dir in sorted(base.glob("wt/*/wi/*/ri/*")):
        run = unquote(run_dir.name)
        groups.append(_Group(unquote(run_dir.parent.parent.name), None if run == "null" else run, run_dir))
    for wf_dir in sorted(base.glob("files/wi/*")):
        groups.append(_Group(unquote(wf_dir.name), None, wf_dir))
    return groups


def _newest_mtime(path: Path) -> datetime:
    newest = path.stat().st_mtime
    for child in path.rglob("*"):
        newest = max(newest, child.stat().st_mtime)
    return datetime.fromtimestamp(newest, UTC)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def namespace_retention(client: Client) -> timedelta:
    described = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))
    return described.config.workflow_execution_retention_ttl.ToTimedelta()


async def _expired(client: Client, group: _Group, retention: timedelta, now: datetime) -> bool:
    try:
        described = await client.get_workflow_handle(group.workflow_id, run_id=group.run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return True  # Temporal no longer has it: nothing can read these blobs any more
        raise
    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        return False
    closed = described.close_time
    return closed is not None and closed + retention < now


async def sweep_directory(client: Client, roots: list[Path], *, now: datetime | None = None,
                          grace: timedelta = DEFAULT_GRACE, dry_run: bool = False) -> SweepReport:
    """Remove the blob directories of expired workflows of `client.namespace` under each of `roots`."""
    now = now or datetime.now(UTC)
    report = SweepReport(retention=await namespace_retention(client))
    for root in roots:
        for group in _groups(root, client.namespace):
            label = group.workflow_id + (f"/{group.run_id}" if group.run_id else "")
            if _newest_mtime(group.path) + grace > now or not await _expired(client, group, report.retention, now):
                report.kept.append(label)
                continue
            report.bytes_removed += _size(group.path)
            report.removed.append(label)
            if not dry_run:
                shutil.rmtree(group.path, ignore_errors=True)
    return report
