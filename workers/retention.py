"""Removing the blobs of workflows Temporal no longer keeps: `dagent store sweep` for the local directory.

Blobs live under a prefix per namespace and workflow (`v0/ns/<ns>/wt/<type>/wi/<id>/ri/<run>/…` for
payloads, `v0/ns/<ns>/files/wi/<id>/…` for files). A workflow's blobs are removed once Temporal has
forgotten the workflow (its history is gone after the namespace's retention) or once it has been closed
for longer than the namespace's retention. Running workflows, workflows within retention, and anything
written within the last `grace` (a client stores a workflow's input before the workflow exists) are kept.
On S3 and GCS a lifecycle rule on the `v0/ns/<ns>/` prefix does the same job (see docs/deploying.md), and
`refresh_live_blobs` (`dagent store refresh`) keeps that rule away from what open workflows still reference.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1.external_storage_pb2 import ExternalStorageReference
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus

from durable_agent.config.connection import described
from durable_agent.config.storage.files import encode_segment
from durable_agent.config.storage.objects import ObjectClient

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
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace), retry=True)
    return described.config.workflow_execution_retention_ttl.ToTimedelta()


async def _expired(client: Client, group: _Group, retention: timedelta, now: datetime) -> bool:
    description = await described(client.get_workflow_handle(group.workflow_id, run_id=group.run_id))
    if description is None:
        return True  # Temporal no longer has it: nothing can read these blobs any more
    if description.status in (None, WorkflowExecutionStatus.RUNNING):
        return False
    closed = description.close_time
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


# --- keeping live workflows' blobs younger than the store's age rule ------------------------------------
#
# On S3/GCS an age-based lifecycle rule deletes objects N days after they were written. A workflow that is
# still open can reference older objects: a conversation's history chain (every link since it began, under
# `files/wi/<conversation id>/`), its own payloads, and payloads of its finished children that its history
# refers to (a child prompt's result is stored under the child's prefix). `refresh_live_blobs` finds every
# object an open workflow references (its two prefixes plus every external-storage claim in its history)
# and re-writes the ones older than `older_than` in place, which restarts their age. Run it more often than
# the rule's age minus `older_than` (e.g. daily with `--older-than 7d` under a 45-day rule).

REFERENCE_MESSAGE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()
LEGACY_REFERENCE_ENCODING = b"json/external-storage-reference"
DEFAULT_REFRESH_AGE = timedelta(days=7)


@dataclass
class RefreshReport:
    workflows: int = 0  # open workflows looked at
    referenced: int = 0  # objects they reference
    refreshed: list[str] = field(default_factory=list)  # keys re-written (or that would be, with dry_run)
    missing: list[str] = field(default_factory=list)  # referenced but gone already (expired or never written)


def _payloads(message: Message) -> Iterator[Payload]:
    """Every `Payload` inside a protobuf message (fields, repeated fields and maps, at any depth)."""
    for descriptor, value in message.ListFields():
        if descriptor.type != descriptor.TYPE_MESSAGE:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            items: Iterable[Any] = value.values()
        elif descriptor.is_repeated:
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, Payload):
                yield item
            elif isinstance(item, Message):
                yield from _payloads(item)


def claimed_key(payload: Payload) -> str | None:
    """The object key an external-storage reference payload points at (None: an ordinary payload)."""
    encoding = payload.metadata.get("encoding", b"")
    if encoding == b"json/protobuf" and payload.metadata.get("messageType") == REFERENCE_MESSAGE_TYPE:
        reference = json_format.Parse(payload.data, ExternalStorageReference(), ignore_unknown_fields=True)
        return reference.claim_data.get("key") or None
    if encoding == LEGACY_REFERENCE_ENCODING:
        data = json.loads(payload.data)
        return (data.get("driver_claim") or {}).get("claim_data", {}).get("key") or None
    return None


def _workflow_prefixes(namespace: str, workflow_type: str, workflow_id: str) -> list[str]:
    ns, wid = encode_segment(namespace), encode_segment(workflow_id)
    # Payloads stored before the type was known (e.g. a client storing a start's input) are under `wt/null`.
    types = {encode_segment(workflow_type), encode_segment(None)}
    return [*(f"v0/ns/{ns}/wt/{t}/wi/{wid}/" for t in sorted(types)), f"v0/ns/{ns}/files/wi/{wid}/"]


async def refresh_live_blobs(client: Client, stores: Sequence[ObjectClient], *, older_than: timedelta =
                             DEFAULT_REFRESH_AGE, now: datetime | None = None, dry_run: bool = False,
                             task_queue: str | None = None) -> RefreshReport:
    """Re-write every object an open workflow of `client.namespace` references that is older than `older_than`.
    `stores`: where payloads and files live (one store for S3; the payload and file directories locally).
    `task_queue`: only the workflows of the deployment on that queue (another deployment sharing the namespace
    may keep its blobs in another store, where this one would report them missing)."""
    now = now or datetime.now(UTC)
    report = RefreshReport()
    referenced: set[str] = set()
    query = "ExecutionStatus = 'Running'"
    if task_queue is not None:
        query += " AND TaskQueue = '" + task_queue.replace("\\", "\\\\").replace("'", "\\'") + "'"
    async for execution in client.list_workflows(query):
        report.workflows += 1
        for objects in stores:
            for prefix in _workflow_prefixes(client.namespace, execution.workflow_type, execution.id):
                referenced.update(await objects.keys(prefix))
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        for event in history.events:
            referenced.update(key for payload in _payloads(event) if (key := claimed_key(payload)))
    report.referenced = len(referenced)
    for key in sorted(referenced):
        found = False
        for objects in stores:
            written = await objects.written_at(key)
            if written is None:
                continue
            found = True
            if written + older_than <= now:
                if not dry_run:
                    await objects.rewrite(key)
                report.refreshed.append(key)
            break
        if not found:
            report.missing.append(key)
    return report
